import { html } from "../html.js";
import { linkClick } from "../router.js";

/** A link to a page of the App: href relative to <base>, followed without a reload. */
export function Link({ to, children, ...rest }) {
  return html`<a href=${to.replace(/^\//, "")} onClick=${linkClick} ...${rest}>${children}</a>`;
}

export function External({ href, children, ...rest }) {
  return html`<a href=${href} target="_blank" rel="noopener" ...${rest}>${children}</a>`;
}
