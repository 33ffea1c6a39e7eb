// Client routing by path with the history API. Paths are the App's own
// ("/usage"); the address adds the App's ROOT in front.
import { useEffect, useState } from "preact/hooks";
import { ROOT, url } from "./api.js";

const EVENT = "acs:navigate";
let guard = null;

export function currentPath() {
  let path = location.pathname;
  if (ROOT && path.startsWith(ROOT)) path = path.slice(ROOT.length);
  path = path.replace(/\/+$/, "");
  return path || "/";
}

/** A page that must not be left silently (a key not copied) sets a guard:
 * a function that returns the question to ask, or null. */
export function setLeaveGuard(fn) {
  guard = fn;
  return () => { if (guard === fn) guard = null; };
}

export function navigate(to, { replace = false } = {}) {
  const question = guard && guard();
  if (question && !window.confirm(question)) return;
  history[replace ? "replaceState" : "pushState"](null, "", url(to));
  window.dispatchEvent(new Event(EVENT));
  window.scrollTo(0, 0);
}

/** Only paths inside the App: "/usage", never "//evil" or "https://...". */
export function safeNext(value) {
  return typeof value === "string" && /^\/(?!\/)/.test(value) && !value.includes("\\") ? value : null;
}

export function useRoute() {
  const read = () => ({ path: currentPath(), query: new URLSearchParams(location.search), key: location.href });
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const update = () => setRoute(read());
    window.addEventListener("popstate", update);
    window.addEventListener(EVENT, update);
    return () => {
      window.removeEventListener("popstate", update);
      window.removeEventListener(EVENT, update);
    };
  }, []);
  return route;
}

/** Replaces the query of the current address (the Usage filters) without a new page. */
export function setQuery(params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value) query.set(key, value);
  const text = query.toString();
  navigate(`${currentPath()}${text ? `?${text}` : ""}`, { replace: true });
}

/** Follows an in-App link without a reload; modified clicks open as the browser does. */
export function linkClick(event) {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const anchor = event.currentTarget;
  if (anchor.target || !anchor.href) return;
  const target = new URL(anchor.href);
  if (target.origin !== location.origin || !target.pathname.startsWith(ROOT + "/")) return;
  event.preventDefault();
  navigate(target.pathname.slice(ROOT.length) + target.search + target.hash);
}
