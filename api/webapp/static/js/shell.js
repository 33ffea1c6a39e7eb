// The signed-in frame: navigation (Playground, Loom, Usage, Jobs, API Keys, in the spec's order; Docs, Support; the
// menu with the User's name), the 90% notice of each page, and Ctrl/Cmd+B.
import { useEffect, useState } from "preact/hooks";
import { html } from "./html.js";
import { api, url } from "./api.js";
import { docs, SUPPORT_EMAIL } from "./config.js";
import { FeedbackDialog } from "./components/feedback_dialog.js";
import { Link } from "./components/link.js";
import { Menu } from "./components/menu.js";
import { NoticeContext } from "./notice.js";
import { lastAddress } from "./playground/address.js";
import { linkClick } from "./router.js";
import { signOut } from "./session.js";

// Playground opens the address that this browser used last (its settings, Single or Compare).
const NAV = [
  { to: lastAddress, label: "Playground", match: (path) => path === "/playground" },
  { to: "/loom", label: "Loom" },
  { to: "/usage", label: "Usage", match: (path) => path.startsWith("/usage") },
  { to: "/jobs", label: "Jobs" },
  { to: "/api-keys", label: "API Keys" },
];
// Admin, for admins only, last (the spec's table of pages).
const ADMIN = { to: "/admin", label: "Admin", match: (path) => path === "/admin" || path.startsWith("/admin/") };
const COLLAPSED = "acs-nav-collapsed";

function useNotice(path) {
  const [notice, setNotice] = useState(null);
  useEffect(() => {
    let live = true;
    api("account/notice").then((doc) => live && setNotice(doc)).catch(() => {});
    return () => { live = false; };
  }, [path]);
  return notice;
}

const PHONE = "(max-width: 720px)";

// On a desktop the navigation stays as the User left it; on a phone it opens
// over the page and folds away on each page change.
function useCollapsed(path) {
  const phone = () => window.matchMedia(PHONE).matches;
  const [collapsed, setCollapsed] = useState(() => phone() || localStorage.getItem(COLLAPSED) === "1");
  const toggle = () => setCollapsed((value) => {
    if (!phone()) localStorage.setItem(COLLAPSED, value ? "0" : "1");
    return !value;
  });
  useEffect(() => {
    const onKey = (event) => {
      if ((event.ctrlKey || event.metaKey) && !event.altKey && !event.shiftKey && event.key.toLowerCase() === "b") {
        event.preventDefault();
        toggle();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);
  useEffect(() => {
    if (phone()) setCollapsed(true);
  }, [path]);
  return [collapsed, toggle];
}

async function leave() {
  try {
    await signOut();
  } finally {
    location.assign(url("sign-in"));
  }
}

function Navigation({ path, user, onFeedback }) {
  // Discord only where the install set ACS_DISCORD_INVITE_URL (/account/me names it), in a new tab.
  const support = [
    { label: "Email", href: `mailto:${SUPPORT_EMAIL}` },
    user.discord_invite_url ? { label: "Discord", href: user.discord_invite_url, external: true } : null,
    { label: "Feedback", onSelect: onFeedback },
    { label: "Help", href: docs("/support"), external: true },
  ];
  const account = [
    { label: "Profile", to: "/profile" },
    { label: "Sign out", onSelect: leave },
  ];
  // A name may be 200 characters: cut to the navigation's width, whole in the title and the menu's name.
  const who = user.name || user.email;
  return html`<nav class="nav" aria-label="The App">
    <ul class="nav-pages">
      ${(user.role === "admin" ? [...NAV, ADMIN] : NAV).map((item) => {
        const current = item.match ? item.match(path) : path === item.to;
        // The Playground's last address changes while its page is open: read it at the click.
        const fresh = typeof item.to === "function"
          ? { onClick: (event) => { event.currentTarget.setAttribute("href", item.to().replace(/^\//, "")); linkClick(event); } } : {};
        return html`<li><${Link} to=${typeof item.to === "function" ? item.to() : item.to} ...${fresh} class="nav-link" aria-current=${current ? "page" : undefined}>${item.label}</${Link}></li>`;
      })}
    </ul>
    <ul class="nav-more">
      <li><a class="nav-link" href=${docs()} target="_blank" rel="noopener" title=${docsTitle()}>Docs</a></li>
      <li><${Menu} label="Support" items=${support} class="nav-menu" align="start" /></li>
      <li><${Menu} label=${html`<span class="cut">${who}</span>`} title=${who} ariaLabel=${`${who}: account menu`}
        items=${account} class="nav-menu nav-user" align="start" /></li>
    </ul>
  </nav>`;
}

// The docs are the hosted team's; this platform serves its own copy of their workshop notebook, at
// an address the Docs link names (its hover text and accessible description).
function docsTitle() {
  return `The docs. The workshop notebook downloads from ${new URL("downloads/workshop.ipynb", document.baseURI)}`;
}

export function Shell({ path, user, children }) {
  const notice = useNotice(path);
  const [collapsed, toggle] = useCollapsed(path);
  const [feedback, setFeedback] = useState(false);
  return html`<div class=${`shell${collapsed ? " nav-collapsed" : ""}`}>
    <a class="skip" href="#main">Skip to the page</a>
    <header class="topbar">
      <button type="button" class="nav-toggle" aria-expanded=${collapsed ? "false" : "true"} aria-controls="app-nav"
        title="Navigation (Ctrl+B)" onClick=${toggle}>
        <span class="nav-toggle-icon" aria-hidden="true"></span><span class="visually-hidden">Navigation</span>
      </button>
      <${Link} to="/usage" class="brand">ACS Infra</${Link}>
    </header>
    <div class="nav-panel" id="app-nav" hidden=${collapsed}>
      <${Navigation} path=${path} user=${user} onFeedback=${() => setFeedback(true)} />
    </div>
    <${FeedbackDialog} open=${feedback} user=${user} onClose=${() => setFeedback(false)} />
    <main id="main" class="main">
      <${NoticeContext.Provider} value=${notice}>${children}</${NoticeContext.Provider}>
    </main>
  </div>`;
}

/** The frame of the pages before sign-in: the name, and the page in a card. */
export function PublicFrame({ children }) {
  return html`<div class="public">
    <header class="public-top"><a class="brand" href=${docs()}>ACS Infra</a></header>
    <main id="main" class="public-main">${children}</main>
  </div>`;
}
