// Numbers and times as the App shows them: 5,000,000 / 2.5M / "05:02 UTC".
const GROUPED = new Intl.NumberFormat("en-US");

export function number(value) {
  return value === null || value === undefined ? "—" : GROUPED.format(value);
}

/** 50K, 2.5M, 100M, 1.2B: at most one decimal, none when it is .0 */
export function compact(value) {
  if (value === null || value === undefined) return "—";
  const units = [[1e12, "T"], [1e9, "B"], [1e6, "M"], [1e3, "K"]];
  for (const [size, unit] of units) {
    if (Math.abs(value) >= size) {
      const scaled = Math.floor((value / size) * 10) / 10;
      return `${scaled.toFixed(scaled % 1 === 0 ? 0 : 1)}${unit}`;
    }
  }
  return String(value);
}

function pad(n) {
  return String(n).padStart(2, "0");
}

export function utcClock(date) {
  return `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())} UTC`;
}

const DAY = new Intl.DateTimeFormat("en-GB", { day: "numeric", month: "short", year: "numeric", timeZone: "UTC" });
const SHORT_DAY = new Intl.DateTimeFormat("en-GB", { day: "numeric", month: "short", timeZone: "UTC" });

export function day(value) {
  if (!value) return "—";
  return DAY.format(typeof value === "string" && value.length === 10 ? new Date(`${value}T00:00:00Z`) : new Date(value));
}

export function shortDay(value) {
  return SHORT_DAY.format(new Date(`${value}T00:00:00Z`));
}

/** A time today shows in UTC, such as "05:02 UTC"; an earlier one shows its date. */
export function when(value, now = new Date()) {
  if (!value) return "—";
  const date = new Date(value);
  const today = date.toISOString().slice(0, 10) === now.toISOString().slice(0, 10);
  return today ? utcClock(date) : day(date);
}

/** When a key was last used, on API Keys and on Usage alike: "05:02 UTC" today, else its date. */
export function lastUsed(value, now = new Date()) {
  return value ? when(value, now) : "Never";
}

const MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
  "november", "december"];

/** The UTC day ("2026-12-04") that a typed "4 Dec 2026", "4 December 2026" or "2026-12-04" names;
 * null for anything else, such as "31 Feb 2026". */
export function parseDay(text) {
  const typed = String(text || "").trim();
  let year, month, date;
  const iso = /^(\d{4})-(\d{1,2})-(\d{1,2})$/.exec(typed);
  const spoken = /^(\d{1,2})\s+([a-z]{3,9})\.?,?\s+(\d{4})$/i.exec(typed);
  if (iso) [year, month, date] = [Number(iso[1]), Number(iso[2]), Number(iso[3])];
  else if (spoken) {
    const index = MONTHS.findIndex((name) => name.startsWith(spoken[2].toLowerCase()));
    if (index < 0) return null;
    [year, month, date] = [Number(spoken[3]), index + 1, Number(spoken[1])];
  } else return null;
  const value = new Date(Date.UTC(year, month - 1, date));
  if (value.getUTCFullYear() !== year || value.getUTCMonth() !== month - 1 || value.getUTCDate() !== date) return null;
  return value.toISOString().slice(0, 10);
}

/** The UTC day `days` after an ISO day ("2026-12-04"). */
export function addDays(isoDay, days) {
  const value = new Date(`${isoDay}T00:00:00Z`);
  value.setUTCDate(value.getUTCDate() + days);
  return value.toISOString().slice(0, 10);
}

/** "2025-11-30 05:02:07" in UTC, for the Completions of Usage. */
export function stamp(value) {
  if (!value) return "—";
  const date = new Date(value);
  return `${date.toISOString().slice(0, 10)} ${utcClock(date).replace(" UTC", "")}:${pad(date.getUTCSeconds())}`;
}

export function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

export function capital(word) {
  return word ? word[0].toUpperCase() + word.slice(1) : "";
}

const DOLLARS = new Intl.NumberFormat("en-US", { style: "currency", currency: "USD" });

/** "$1,234.50": the GPU spend and what a warm window costs. */
export function usd(value) {
  return value === null || value === undefined ? "—" : DOLLARS.format(value);
}
