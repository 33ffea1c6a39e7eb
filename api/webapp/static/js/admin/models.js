// Admin's Models tab (spec: "Keep a model Warm"): each served model with its Floor and what its
// windows cost in the Next 7 days; its actions Add a window and Warm now; and the Warm windows,
// each with Remove, whose confirmation shows what the window costs. Each dialog shows the cost
// as it is filled in, at the model's price of a Warm hour (its GPUs at the catalog's price).
import { useLayoutEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { LoadFailed } from "../components/load_failed.js";
import { usePolledRead } from "../components/polled_read.js";
import { api } from "../api.js";
import { ConfirmDialog } from "../components/confirm_dialog.js";
import { Dialog } from "../components/dialog.js";
import { Field, FormError, splitError } from "../components/field.js";
import { Form, useSubmit } from "../components/form.js";
import { number, usd, utcClock, when } from "../components/format.js";
import { Menu } from "../components/menu.js";
import { ModelId, nameOf, useModels } from "../components/model_name.js";

const DAY_NAMES = [[1, "Monday"], [2, "Tuesday"], [3, "Wednesday"], [4, "Thursday"], [5, "Friday"], [6, "Saturday"], [7, "Sunday"]];
const SHORT = { 1: "Mon", 2: "Tue", 3: "Wed", 4: "Thu", 5: "Fri", 6: "Sat", 7: "Sun" };
const MINUTES_A_DAY = 24 * 60;

function zones() {
  // UTC first (the window's zone at first), then the browser's IANA zones.
  const all = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  return ["UTC", ...all.filter((zone) => zone !== "UTC")];
}

const TIME_ERROR = "Write a time of the 24-hour clock, such as 08:30.";

function minuteOf(text) {
  const found = /^(\d{1,2}):(\d{2})$/.exec((text || "").trim());
  if (!found) return null;
  const [hours, minutes] = [Number(found[1]), Number(found[2])];
  return hours < 24 && minutes < 60 ? hours * 60 + minutes : null;
}

/** A window's hours in a week, as the API counts them: one that ends at or before its start ends the next day. */
/** "8:30" as the API takes it: "08:30". */
function padded(text) {
  const minute = minuteOf(text);
  return minute === null ? text : `${String(Math.floor(minute / 60)).padStart(2, "0")}:${String(minute % 60).padStart(2, "0")}`;
}

function hoursAWeek(days, from, to) {
  const start = minuteOf(from);
  const end = minuteOf(to);
  if (start === null || end === null) return null;
  const minutes = (end - start + MINUTES_A_DAY) % MINUTES_A_DAY || MINUTES_A_DAY;
  return (days.length * minutes) / 60;
}

function hours(value) {
  return `${number(Math.round(value * 100) / 100)} ${value === 1 ? "hour" : "hours"}`;
}

function dayList(days) {
  if (days.length === 7) return "Every day";
  if (days.join() === "1,2,3,4,5") return "Mon to Fri";
  return days.map((each) => SHORT[each]).join(", ");
}

function windowWhen(window) {
  if (window.kind === "warm_now") {
    const ends = when(window.ends_at);
    return `Warm now, until ${ends.endsWith("UTC") ? ends : `${ends}, ${utcClock(new Date(window.ends_at))}`}`;
  }
  const next = minuteOf(window.to) <= minuteOf(window.from) ? " the next day" : "";
  return `${dayList(window.days)}, ${window.from} to ${window.to}${next} ${window.time_zone}`;
}

function windowCost(window) {
  return window.kind === "warm_now" ? `${usd(window.usd)} for ${hours(window.hours)}` : `${usd(window.usd_per_week)} a week`;
}

function AddWindowDialog({ model, names, onAdd, onClose }) {
  const [days, setDays] = useState([1, 2, 3, 4, 5]);
  const [from, setFrom] = useState("08:30");
  const [to, setTo] = useState("18:00");
  const [zone, setZone] = useState("UTC");
  const [typed, setTyped] = useState({});
  const form = useSubmit(async () => {
    // The browser's time field shows a 12-hour clock in some languages: the App writes 24-hour times.
    const wrong = {};
    if (minuteOf(from) === null) wrong.from = TIME_ERROR;
    if (minuteOf(to) === null) wrong.to = TIME_ERROR;
    if (!days.length) wrong.days = "Choose at least one day.";
    setTyped(wrong);
    if (Object.keys(wrong).length) return;
    await onAdd({ model: model.model, days, from: padded(from), to: padded(to), time_zone: zone });
  });
  useLayoutEffect(() => {
    if (model) { setDays([1, 2, 3, 4, 5]); setFrom("08:30"); setTo("18:00"); setZone("UTC"); setTyped({}); form.reset(); }
  }, [model]);
  if (!model) return null;
  const errors = splitError(form.error, ["days", "from", "to", "time_zone"]);
  for (const [name, message] of Object.entries(typed)) errors.field[name] = message;
  const weekly = days.length ? hoursAWeek(days, from, to) : 0;
  const nextDay = minuteOf(from) !== null && minuteOf(to) !== null && minuteOf(to) <= minuteOf(from);
  const toggle = (value, on) => {
    setDays(on ? [...days, value].sort() : days.filter((each) => each !== value));
    setTyped({ ...typed, days: null });
  };
  return html`<${Dialog} open=${true} title=${`Add a window for ${nameOf(names, model.model)}`} onCancel=${onClose} class="dialog-warm">
    <${Form} onSubmit=${form.submit}>
      <fieldset class=${`field checks warm-days${errors.field.days ? " field-invalid" : ""}`}
        aria-describedby=${errors.field.days ? "warm-days-error" : undefined}>
        <legend>Days</legend>
        <div class="warm-day-list">${DAY_NAMES.map(([value, name]) => html`<div class="field-check">
          <input type="checkbox" id=${`warm-day-${value}`} checked=${days.includes(value)}
            onChange=${(event) => toggle(value, event.currentTarget.checked)} />
          <label for=${`warm-day-${value}`}>${name}</label>
        </div>`)}</div>
        ${errors.field.days ? html`<p class="field-error" id="warm-days-error">${errors.field.days}</p>` : null}
      </fieldset>
      <div class="warm-times">
        <${Field} label="From" value=${from} onInput=${(text) => { setFrom(text); setTyped({ ...typed, from: null }); }}
          required autocomplete="off" maxlength="5" hint="24-hour clock, such as 08:30." error=${errors.field.from} />
        <${Field} label="To" value=${to} onInput=${(text) => { setTo(text); setTyped({ ...typed, to: null }); }}
          required autocomplete="off" maxlength="5" hint="24-hour clock, such as 18:00." error=${errors.field.to} />
      </div>
      ${nextDay ? html`<p class="hint warm-next-day">It ends at ${padded(to)} the next day.</p>` : null}
      <div class=${`field${errors.field.time_zone ? " field-invalid" : ""}`}>
        <label for="warm-zone">Time zone</label>
        <select id="warm-zone" value=${zone} onChange=${(event) => setZone(event.currentTarget.value)}>
          ${zones().map((each) => html`<option value=${each}>${each}</option>`)}
        </select>
        ${errors.field.time_zone ? html`<p class="field-error">${errors.field.time_zone}</p>` : null}
      </div>
      <p class="warm-cost" role="status">${weekly === null
        ? "Choose From and To to see what the window costs."
        : `Costs ${usd(weekly * model.replica_hour_usd)} a week: ${hours(weekly)} at ${usd(model.replica_hour_usd)} an hour.`}</p>
      <${FormError} message=${errors.form} />
      <div class="actions actions-end">
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary" disabled=${form.busy}>Add window</button>
      </div>
    </${Form}>
  </${Dialog}>`;
}

function WarmNowDialog({ model, names, onWarm, onClose }) {
  const [count, setCount] = useState("1");
  const [invalid, setInvalid] = useState(null);
  const form = useSubmit(async () => {
    const value = Number(count);
    if (!Number.isInteger(value) || value < 1 || value > 24) {
      setInvalid("Enter a whole number of hours from 1 to 24.");
      return;
    }
    await onWarm({ model: model.model, hours: value });
  });
  useLayoutEffect(() => { if (model) { setCount("1"); setInvalid(null); form.reset(); } }, [model]);
  if (!model) return null;
  const errors = splitError(form.error, ["hours"]);
  const value = Number(count);
  const valid = Number.isInteger(value) && value >= 1 && value <= 24;
  return html`<${Dialog} open=${true} title=${`Warm ${nameOf(names, model.model)} now`} onCancel=${onClose}>
    <${Form} onSubmit=${form.submit}>
      <${Field} label="Hours" type="number" min="1" max="24" step="1" inputmode="numeric" value=${count}
        onInput=${(text) => { setCount(text); setInvalid(null); }} required hint="From 1 to 24. It ends by itself."
        error=${invalid || errors.field.hours} />
      <p class="warm-cost" role="status">${valid
        ? `Costs ${usd(value * model.replica_hour_usd)}: ${hours(value)} at ${usd(model.replica_hour_usd)} an hour.`
        : "Enter the hours to see what it costs."}</p>
      <${FormError} message=${errors.form} />
      <div class="actions actions-end">
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary" disabled=${form.busy}>Warm now</button>
      </div>
    </${Form}>
  </${Dialog}>`;
}

function removeText(window, names) {
  const cost = window.kind === "warm_now"
    ? `It costs ${usd(window.usd)} for its ${hours(window.hours)}, ${usd(window.next_7_days_usd)} of that still to come.`
    : `It costs ${usd(window.usd_per_week)} a week, ${usd(window.next_7_days_usd)} in the next 7 days.`;
  return `${nameOf(names, window.model)}, ${windowWhen(window)}. ${cost} Once removed, it no longer keeps the model Warm.`;
}

function Models({ doc, names, onAdd, onWarm }) {
  return html`<div class="table-scroll" tabindex="0" role="region" aria-label="Models">
    <table class="table models-table">
      <caption class="visually-hidden">Models</caption>
      <thead><tr><th scope="col">Model</th><th scope="col" class="num">Floor</th><th scope="col" class="num">Warm hour</th>
        <th scope="col" class="num">Next 7 days</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
      <tbody>${doc.models.map((model) => html`<tr>
        <td><${ModelId} id=${model.model} models=${names} />${model.warm_now ? html` <span class="badge badge-active">Warm</span>` : null}</td>
        <td class="num">${number(model.floor)}</td>
        <td class="num">${usd(model.replica_hour_usd)}</td>
        <td class="num">${usd(model.next_7_days_usd)}</td>
        <td class="row-menu"><${Menu} label=${html`<span aria-hidden="true">⋯</span>`} ariaLabel=${`Actions of ${nameOf(names, model.model)}`}
          floating=${true} items=${[{ label: "Add a window", onSelect: () => onAdd(model) },
            { label: "Warm now", onSelect: () => onWarm(model) }]} /></td>
      </tr>`)}</tbody>
    </table>
  </div>`;
}

function Windows({ doc, names, onRemove }) {
  if (!doc.windows.length) return html`<p class="note">No window keeps a model Warm. Add one in a model's actions.</p>`;
  return html`<div class="table-scroll" tabindex="0" role="region" aria-label="Warm windows">
    <table class="table warm-table">
      <caption class="visually-hidden">Warm windows</caption>
      <thead><tr><th scope="col">Model</th><th scope="col">When</th><th scope="col" class="num">Cost</th>
        <th scope="col" class="num">Next 7 days</th><th scope="col" class="wide">Added by</th>
        <th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
      <tbody>${doc.windows.map((window) => html`<tr>
        <td><${ModelId} id=${window.model} models=${names} />${window.on_now ? html` <span class="badge badge-active">On</span>` : null}</td>
        <td>${windowWhen(window)}</td>
        <td class="num nowrap">${windowCost(window)}</td>
        <td class="num">${usd(window.next_7_days_usd)}</td>
        <td class="wide">${window.created_by}</td>
        <td class="row-menu"><${Menu} label=${html`<span aria-hidden="true">⋯</span>`} floating=${true}
          ariaLabel=${`Actions of the window of ${nameOf(names, window.model)}, ${windowWhen(window)}`}
          items=${[{ label: "Remove", onSelect: () => onRemove(window), danger: true }]} /></td>
      </tr>`)}</tbody>
    </table>
  </div>`;
}

export default function ModelsTab() {
  const [state, reload] = usePolledRead("v1/admin/warm-windows");
  const names = useModels();
  const [dialog, setDialog] = useState(null); // {kind: "add"|"warm"|"remove", model | window}
  const close = () => setDialog(null);
  async function add(body) {
    await api("v1/admin/warm-windows", { method: "POST", body });
    close();
    reload();
  }
  async function warm(body) {
    await api("v1/admin/warm-windows/now", { method: "POST", body });
    close();
    reload();
  }
  async function remove(window) {
    await api(`v1/admin/warm-windows/${window.id}`, { method: "DELETE" });
    close();
    reload();
  }
  const doc = state.doc;
  if (!doc) {
    return state.error
      ? html`<${LoadFailed} text=${`Could not read the models: ${state.error}`} onRetry=${reload} />`
      : html`<p class="loading" role="status">Loading…</p>`;
  }
  return html`<div class="models-tab">
    <p class="note">The Floor is the containers that Inference keeps running without requests. A Warm hour costs the model's GPUs.
      Start a window 30 to 45 minutes before Users need the model. While new GPU work is paused, no window keeps a model Warm.</p>
    ${state.error ? html`<p class="form-error" role="status">Could not refresh: ${state.error}</p>` : null}
    <${Models} doc=${doc} names=${names} onAdd=${(model) => setDialog({ kind: "add", model })} onWarm=${(model) => setDialog({ kind: "warm", model })} />
    <h2 class="warm-title">Warm windows</h2>
    <${Windows} doc=${doc} names=${names} onRemove=${(window) => setDialog({ kind: "remove", window })} />
    <${AddWindowDialog} names=${names} model=${dialog?.kind === "add" ? dialog.model : null} onAdd=${add} onClose=${close} />
    <${WarmNowDialog} names=${names} model=${dialog?.kind === "warm" ? dialog.model : null} onWarm=${warm} onClose=${close} />
    <${ConfirmDialog} subject=${dialog?.kind === "remove" ? dialog.window : null} title="Remove this window?"
      text=${dialog?.kind === "remove" ? removeText(dialog.window, names) : ""} action="Remove" onConfirm=${remove} onClose=${close} />
  </div>`;
}
