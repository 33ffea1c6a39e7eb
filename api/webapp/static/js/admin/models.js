// The Admin page's tab "models": being built (issue 37).
import { html } from "../html.js";

export default function Tab() {
  return html`<p>This tab is being built.</p>`;
}
