// Jobs: the App lists no Jobs; a Job runs from a script.
import { html } from "../html.js";
import { docs } from "../config.js";
import { PageHeader } from "../notice.js";

export default function Jobs() {
  return html`<${PageHeader} title="Jobs" />
    <section class="panel narrow" aria-label="Run a Job">
      <p>A Job runs many prompts in the background, with your API key. The App has no list of Jobs: you start and
        read them with the API.</p>
      <p><a class="button primary" href=${docs("/cookbook/job-script")} target="_blank" rel="noopener">Run a Job from a script</a></p>
    </section>`;
}
