// What a page or a part shows when its first read failed: why, and Try again (none where a retry cannot
// help, such as a User who does not exist). A read that fails later keeps the numbers it had instead.
import { html } from "../html.js";

export function LoadFailed({ heading, text, onRetry }) {
  return html`<div class="load-failed" role="alert">
    ${heading ? html`<h2>${heading}</h2>` : null}
    <p>${text}</p>
    ${onRetry ? html`<button type="button" class="primary" onClick=${onRetry}>Try again</button>` : null}
  </div>`;
}
