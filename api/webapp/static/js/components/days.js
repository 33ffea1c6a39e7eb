// The days at the top of a page that counts (Usage, Admin's Analytics, a User's page): the named
// ranges (Today … Last month) and a calendar of a first and a last day, then Apply. The page keeps
// the choice in its address as `range`, or `from` and `to`; this month is the default and has no
// `range` in the address.
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "../html.js";
import { addDays, day, parseDay } from "./format.js";

export const RANGES = [
  ["today", "Today"], ["last_7_days", "Last 7 days"], ["last_30_days", "Last 30 days"],
  ["this_month", "This month"], ["last_month", "Last month"],
];

/** The days that an address names: { range, from, to } (empty strings where it names none). */
export function daysOf(query) {
  return { range: query.get("range") || "", from: query.get("from") || "", to: query.get("to") || "" };
}

/** The first and last UTC day ("2026-12-04") of the days chosen, for routes that take only from
 * and to; the named ranges count as GET /account/usage counts them (domain usage_page.range_days). */
export function daysRange(days, now = new Date()) {
  if (days.from && days.to) return { from: days.from, to: days.to };
  const today = now.toISOString().slice(0, 10);
  const monthStart = `${today.slice(0, 8)}01`;
  switch (days.range) {
    case "today": return { from: today, to: today };
    case "last_7_days": return { from: addDays(today, -6), to: today };
    case "last_30_days": return { from: addDays(today, -29), to: today };
    case "last_month": {
      const last = addDays(monthStart, -1);
      return { from: `${last.slice(0, 8)}01`, to: last };
    }
    default: return { from: monthStart, to: today };
  }
}

/** A day typed as the App shows it ("4 Dec 2026"), not the browser's mm/dd/yyyy; the arrow keys
 * move it a day at a time. */
function DayField({ id, label, value, onChange, invalid, hint }) {
  const step = (event) => {
    const days = { ArrowUp: 1, ArrowDown: -1 }[event.key];
    const current = parseDay(event.currentTarget.value);
    if (!days || !current) return;
    event.preventDefault();
    onChange(day(addDays(current, days)));
  };
  return html`<div class="field field-inline day-field"><label for=${id}>${label}</label>
    <input id=${id} type="text" inputmode="text" autocomplete="off" spellcheck="false" placeholder="4 Dec 2026"
      aria-describedby=${hint} aria-invalid=${invalid ? "true" : "false"} value=${value}
      onInput=${(e) => onChange(e.currentTarget.value)} onKeyDown=${step} /></div>`;
}

/** The calendar: a first and a last day, then Apply, in a panel under its button so that the
 * filters keep to one row. `name` keeps its ids apart from another picker's. */
function Calendar({ name, days, pick }) {
  const [open, setOpen] = useState(false);
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const [wrong, setWrong] = useState(null);
  const box = useRef(null);
  const button = useRef(null);
  const shown = (value) => (value ? day(value) : "");
  useEffect(() => { setFrom(shown(days.from)); setTo(shown(days.to)); setWrong(null); }, [days.from, days.to]);
  useEffect(() => {
    if (!open) return undefined;
    box.current.querySelector("input").focus();
    const outside = (event) => { if (!box.current.contains(event.target)) setOpen(false); };
    document.addEventListener("pointerdown", outside);
    return () => document.removeEventListener("pointerdown", outside);
  }, [open]);
  const close = () => { setOpen(false); button.current.focus(); };
  const apply = (event) => {
    event.preventDefault();
    const first = parseDay(from);
    const last = parseDay(to);
    if (!first || !last) { setWrong(!first ? "first" : "last"); return; }
    setWrong(null);
    setOpen(false);
    pick({ range: "", from: first, to: last });
  };
  const custom = Boolean(days.from && days.to);
  const hint = `${name}-days-hint`;
  return html`<div class="calendar-box" ref=${box} onKeyDown=${(e) => { if (e.key === "Escape" && open) close(); }}>
    <button type="button" ref=${button} class=${custom ? "calendar-button chosen" : "calendar-button"}
      aria-expanded=${open ? "true" : "false"} aria-controls=${`${name}-calendar`} onClick=${() => setOpen(!open)}>
      Calendar</button>
    <form id=${`${name}-calendar`} class="calendar" hidden=${!open} onSubmit=${apply}>
      <${DayField} id=${`${name}-from`} label="First day" value=${from} onChange=${setFrom} invalid=${wrong === "first"} hint=${hint} />
      <${DayField} id=${`${name}-to`} label="Last day" value=${to} onChange=${setTo} invalid=${wrong === "last"} hint=${hint} />
      <button type="submit" disabled=${!from.trim() || !to.trim()}>Apply</button>
      <p id=${hint} class="calendar-hint">Such as 4 Dec 2026. The arrow keys move a day.</p>
      ${wrong ? html`<p class="calendar-hint form-error" role="alert">Write the ${wrong} day as a date, such as 4 Dec 2026.</p>` : null}
    </form>
  </div>`;
}

/** The named ranges and the calendar. `days` is daysOf(address); `pick(changes)` writes the
 * address with { range, from, to } changed. */
export function DayPicker({ name, days, pick }) {
  const current = days.from && days.to ? null : days.range || "this_month";
  return html`<div class="segmented" role="group" aria-label="Days">
      ${RANGES.map(([value, label]) => html`<button type="button" aria-pressed=${current === value ? "true" : "false"}
        onClick=${() => pick({ range: value === "this_month" ? "" : value, from: "", to: "" })}>${label}</button>`)}
    </div>
    <${Calendar} name=${name} days=${days} pick=${pick} />`;
}
