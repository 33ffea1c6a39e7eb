// The 90% notice under each page's title. Its close button hides it for the
// browser session, until it says that no tokens are left.
import { createContext } from "preact";
import { useContext, useState } from "preact/hooks";
import { html } from "./html.js";
import { Link } from "./components/link.js";

export const NoticeContext = createContext(null);
const CLOSED = "acs-notice-closed";

function closedFor(notice) {
  const closed = sessionStorage.getItem(CLOSED);
  return closed === "none" || (closed === "some" && notice.left > 0);
}

export function Notice() {
  const notice = useContext(NoticeContext);
  const [, rerender] = useState(0);
  if (!notice || !notice.show || closedFor(notice)) return null;
  const close = () => {
    sessionStorage.setItem(CLOSED, notice.left > 0 ? "some" : "none");
    rerender((n) => n + 1);
  };
  return html`<div class=${`notice${notice.left > 0 ? "" : " notice-empty"}`} role="status">
    <p>${notice.text} <${Link} to="/usage/request">Request more</${Link}></p>
    <button type="button" class="notice-close" aria-label="Close the notice" onClick=${close}>×</button>
  </div>`;
}

/** The page's h1, what sits beside it (Updated, Refresh), and the notice under it. */
export function PageHeader({ title, children }) {
  return html`<header class="page-header">
    <div class="page-title-row">
      <h1 id="page-title" tabindex="-1">${title}</h1>
      ${children ? html`<div class="page-title-side">${children}</div>` : null}
    </div>
    <${Notice} />
  </header>`;
}
