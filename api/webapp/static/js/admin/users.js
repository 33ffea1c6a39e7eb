// The Admin page's tab "users": being built (issue 37).
import { html } from "../html.js";

export default function Tab() {
  return html`<p>This tab is being built.</p>`;
}
