// JSON calls to the App's account routes: relative to the App's root (the
// shell's acs-root meta, an attribute so that the Content-Security-Policy
// needs no inline script for it), with the session cookie, and the
// double-submit CSRF header on every unsafe method.
const ROOT_META = document.querySelector('meta[name="acs-root"]');
export const ROOT = (ROOT_META ? ROOT_META.content : "").replace(/\/$/, "");
const SAFE = new Set(["GET", "HEAD", "OPTIONS"]);

export function url(path) {
  return `${ROOT}/${String(path).replace(/^\//, "")}`;
}

export class ApiError extends Error {
  constructor(status, body, headers) {
    const error = (body && body.error) || {};
    super(error.message || (status ? `The App got an error (${status}).` : "Could not reach the App."));
    this.status = status;
    this.code = error.code || null;
    this.param = error.param || null;
    this.type = error.type || null;
    this.requestId = (body && body.request_id) || null;
    const retry = headers ? Number(headers.get("Retry-After")) : NaN;
    this.retryAfter = Number.isFinite(retry) && retry > 0 ? retry : null;
  }
}

export function cookie(name) {
  for (const part of document.cookie.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return decodeURIComponent(rest.join("="));
  }
  return null;
}

async function csrfToken() {
  let token = cookie("acs_csrf");
  if (!token) {
    await fetch(url("account/csrf"), { credentials: "same-origin" });
    token = cookie("acs_csrf");
  }
  return token || "";
}

// The page to go back to after sign-in: this one, with its query.
export function here() {
  const path = location.pathname.startsWith(ROOT) ? location.pathname.slice(ROOT.length) : location.pathname;
  return (path || "/") + location.search;
}

export function signInAddress(ended) {
  const query = new URLSearchParams({ next: here() });
  if (ended) query.set("ended", "1");
  return url(`sign-in?${query}`);
}

let ending = false;
function sessionEnded() {
  // Someone who never had a session has no CSRF cookie: plain sign-in, no "ended" note.
  if (ending) return;
  ending = true;
  location.assign(signInAddress(Boolean(cookie("acs_csrf"))));
}

async function read(response) {
  if (response.status === 204) return null;
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

// The App's recent failed calls, which Send feedback shows and sends with a note: the last 10, oldest first,
// each with its status, code, message and request id (X-Request-Id). Kept in this tab's sessionStorage, so a
// reload after a failure still has them; a browser that refuses storage keeps them for the page alone.
const RECENT_KEY = "acs-recent-errors";
const RECENT_MAX = 10;
let recent = [];
try {
  recent = JSON.parse(sessionStorage.getItem(RECENT_KEY) || "[]");
} catch {
  recent = [];
}

export function recentErrors() {
  return recent.slice();
}

function remember(path, error, response) {
  const requestId = (response && response.headers.get("X-Request-Id")) || error.requestId || null;
  recent = [...recent, { status: error.status, code: error.code, message: error.message, request_id: requestId,
    path: String(path).split("?")[0], at: new Date().toISOString() }].slice(-RECENT_MAX);
  try {
    sessionStorage.setItem(RECENT_KEY, JSON.stringify(recent));
  } catch {
    // storage full or refused: the list in memory is enough
  }
}

/** api("account/keys"), api("account/keys", {method: "POST", body: {name}}).
 * Throws ApiError; a 401 session_ended opens sign-in unless `quiet401`. */
export async function api(path, { method = "GET", body, signal, quiet401 = false } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (!SAFE.has(method)) headers["X-CSRF-Token"] = await csrfToken();
  let response;
  try {
    response = await fetch(url(path), {
      method, headers, signal, credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    if (error && error.name === "AbortError") throw error;
    const unreached = new ApiError(0, null, null);
    remember(path, unreached, null);
    throw unreached;
  }
  const data = await read(response);
  if (response.ok) return data;
  const error = new ApiError(response.status, data, response.headers);
  remember(path, error, response);
  if (response.status === 401 && error.code === "session_ended" && !quiet401) sessionEnded();
  throw error;
}
