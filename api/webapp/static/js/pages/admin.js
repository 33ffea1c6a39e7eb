// Admin, for admins only: one tab at a time, its name kept in the address (?tab=), each tab a module
// under admin/ loaded when first opened. Anyone else gets the App's own "Page not found".
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "../html.js";
import { navigate } from "../router.js";
import { PageHeader } from "../notice.js";
import NotFound from "./not_found.js";

// [?tab= value, label, module under admin/]; the first is the tab that an address without one opens.
export const TABS = [
  ["users", "Users", "users"],
  ["applications", "Applications", "applications"],
  ["token-requests", "Token requests", "token_requests"],
  ["analytics", "Analytics", "analytics"],
  ["models", "Models", "models"],
  ["feedback", "Feedback", "feedback"],
];
const modules = {};

function useTabModule(name) {
  const [, setLoaded] = useState(0);
  useEffect(() => {
    if (modules[name]) return;
    let live = true;
    import(`../admin/${name}.js`).then((module) => {
      modules[name] = module.default;
      if (live) setLoaded((n) => n + 1);
    });
    return () => { live = false; };
  }, [name]);
  return modules[name] || null;
}

/** The address of a tab, keeping only what that tab reads (a tab's own filters go with it). */
export function tabAddress(tab, params = {}) {
  const query = new URLSearchParams({ tab });
  for (const [key, value] of Object.entries(params)) if (value) query.set(key, value);
  return `/admin?${query}`;
}

function TabList({ current }) {
  const refs = useRef([]);
  const go = (index) => {
    const [tab] = TABS[(index + TABS.length) % TABS.length];
    navigate(tabAddress(tab), { replace: false });
    requestAnimationFrame(() => refs.current[(index + TABS.length) % TABS.length]?.focus());
  };
  // The WAI-ARIA tabs pattern: arrows, Home and End move between tabs; only the current one is in the Tab order.
  const onKey = (event, index) => {
    const moves = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: TABS.length - 1 };
    if (!(event.key in moves)) return;
    event.preventDefault();
    go(moves[event.key]);
  };
  return html`<div class="tabs admin-tabs" role="tablist" aria-label="Admin">
    ${TABS.map(([tab, label], index) => html`<button type="button" role="tab" id=${`admin-tab-${tab}`}
      ref=${(node) => { refs.current[index] = node; }} aria-selected=${tab === current ? "true" : "false"}
      aria-controls="admin-panel" tabindex=${tab === current ? "0" : "-1"}
      onClick=${() => go(index)} onKeyDown=${(event) => onKey(event, index)}>${label}</button>`)}
  </div>`;
}

export default function Admin({ route, user }) {
  if (!user || user.role !== "admin") return html`<${NotFound} route=${route} user=${user} />`;
  const asked = route.query.get("tab");
  const entry = TABS.find(([tab]) => tab === asked) || TABS[0];
  const [tab, , module] = entry;
  const Tab = useTabModule(module);
  return html`<${PageHeader} title="Admin" />
    <${TabList} current=${tab} />
    <div class="admin-panel" id="admin-panel" role="tabpanel" aria-labelledby=${`admin-tab-${tab}`}>
      ${Tab ? html`<${Tab} route=${route} user=${user} />` : html`<p class="loading" role="status">Loading…</p>`}
    </div>`;
}
