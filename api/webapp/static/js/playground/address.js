// What the Playground keeps where (spec: "Share your settings"): the address holds each model's
// settings, Single or Compare, and the Heatmap, never the prompt, a Run or a Steering vector; the
// browser keeps the prompt as a draft, and the last address for Playground in the navigation.
// Sign out forgets both (session.js).
import { ADDRESS_KEYS, defaults } from "./fields.js";

export const PATH = "/playground";
const DRAFT = "acs-playground-draft";
const LAST = "acs-playground-address";
const SETTINGS_CLOSED = "acs-playground-settings-closed";
export const MOST_MODELS = 6;

/** Each model's settings that differ from a new form's, as the address's `m` values. */
function modelParam(settings) {
  const fresh = defaults(settings.model);
  const kept = {};
  for (const key of ADDRESS_KEYS) if (key === "model" || settings[key] !== fresh[key]) kept[key] = settings[key];
  return JSON.stringify(kept);
}

function modelOf(text) {
  try {
    const kept = JSON.parse(text);
    if (!kept || typeof kept !== "object" || Array.isArray(kept)) return null;
    const settings = defaults(typeof kept.model === "string" ? kept.model : "");
    for (const key of ADDRESS_KEYS) {
      if (!(key in kept)) continue;
      const value = kept[key];
      if (typeof value === typeof settings[key]) settings[key] = value;
    }
    return settings;
  } catch {
    return null;
  }
}

/** The page's view from its address: {models: [settings...], compare, heatmap}. */
export function readAddress(query) {
  const models = query.getAll("m").map(modelOf).filter(Boolean).slice(0, MOST_MODELS);
  return { models, compare: query.get("view") === "compare", heatmap: query.get("heatmap") !== "off" };
}

export function addressOf({ list, compare, heatmap }) {
  const query = new URLSearchParams();
  if (compare) query.set("view", "compare");
  if (!heatmap) query.set("heatmap", "off");
  for (const settings of compare ? list : list.slice(0, 1)) query.append("m", modelParam(settings));
  const text = query.toString();
  return `${PATH}${text ? `?${text}` : ""}`;
}

function stored(kind, key) {
  try {
    return window[kind].getItem(key);
  } catch {
    return null;
  }
}

function store(kind, key, value) {
  try {
    if (value === null) window[kind].removeItem(key);
    else window[kind].setItem(key, value);
  } catch {
    // A browser that keeps nothing (private mode, full storage): the page works without it.
  }
}

export const draft = {
  read: () => stored("localStorage", DRAFT) || "",
  write: (text) => store("localStorage", DRAFT, text || null),
};

/** The address that Playground in the navigation opens: the one this browser used last. */
export function lastAddress() {
  const last = stored("localStorage", LAST);
  return last && last.startsWith(`${PATH}?`) ? last : PATH;
}

export function rememberAddress(address) {
  store("localStorage", LAST, address);
}

export const settingsPanel = {
  closed: () => stored("localStorage", SETTINGS_CLOSED) === "1",
  set: (closed) => store("localStorage", SETTINGS_CLOSED, closed ? "1" : null),
};

export function forgetLastAddress() {
  store("localStorage", LAST, null);
}

/** Sign out: the draft and the last address go (spec: "When you sign out, the App forgets the
 * draft and that address"). */
export function forgetPlayground() {
  store("localStorage", DRAFT, null);
  store("localStorage", LAST, null);
}
