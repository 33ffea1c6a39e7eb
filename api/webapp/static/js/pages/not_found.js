// Page not found: an address of the App that no page has (the server answers it with 404). In the
// signed-in frame it offers Usage, the App's first page; before sign-in, Sign in.
import { html } from "../html.js";
import { Link } from "../components/link.js";
import { PageHeader } from "../notice.js";

function What({ path }) {
  return html`<p class="break">The App has no page at <code>${path}</code>. The address may be mistyped, or the page may have moved.</p>`;
}

export default function NotFound({ route, user }) {
  if (user) {
    return html`<${PageHeader} title="Page not found" />
      <section class="panel narrow" aria-label="Where to go">
        <${What} path=${route.path} />
        <div class="actions"><${Link} to="/usage" class="button primary">Open Usage</${Link}></div>
      </section>`;
  }
  return html`<section class="card">
    <h1>Page not found</h1>
    <${What} path=${route.path} />
    <div class="actions"><${Link} to="/sign-in" class="button primary">Sign in</${Link}></div>
    <p class="aside">No account yet? <${Link} to="/apply">Apply for access</${Link}></p>
  </section>`;
}
