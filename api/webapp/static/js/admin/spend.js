// Analytics' Spend tab (spec: "Watch the spend"): what the GPUs cost, the amounts that warn the team
// and that pause new GPU work, and the Spend stop with Lock and Clear. Analytics renders it with the
// days chosen at its top ({from, to}, UTC days), which count GPU spend per day alone; the other parts
// count the last 24 or 48 hours. It reads the numbers again every minute.
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { LoadFailed } from "../components/load_failed.js";
import { usePolledRead } from "../components/polled_read.js";
import { api } from "../api.js";
import { DayChart } from "../chart.js";
import { ConfirmDialog } from "../components/confirm_dialog.js";
import { Dialog } from "../components/dialog.js";
import { Field, FormError, splitError } from "../components/field.js";
import { Form, useSubmit } from "../components/form.js";
import { day, number, usd, utcClock, when } from "../components/format.js";
import { Link } from "../components/link.js";
import { ModelId, nameOf, useModels } from "../components/model_name.js";

// The models that cost the most, then the others as one (grey): distinct at a glance and on a phone.
const COLORS = ["#1f5fd6", "#d97706", "#0f766e", "#9333ea", "#be123c"];
const OTHERS = "#8a93a3";
const OTHER_KEY = "__others";
const CHANGE_NAMES = { lock: "Lock", clear: "Clear", pause: "Pause" };

function address(days) {
  const query = new URLSearchParams();
  if (days?.from) query.set("from", days.from);
  if (days?.to) query.set("to", days.to);
  const text = query.toString();
  return text ? `v1/admin/spend?${text}` : "v1/admin/spend";
}

function amounts(list) {
  if (!list.length) return null;
  const shown = list.map(usd);
  return shown.length === 1 ? shown[0] : `${shown.slice(0, -1).join(", ")} and ${shown[shown.length - 1]}`;
}

function Top({ doc }) {
  const warn = amounts(doc.warn_usd);
  return html`<div class="stats spend-top">
    <div class="stat"><h2 class="stat-title">Last 24 hours</h2>
      <p class="big">${usd(doc.last_24h_usd)}</p>
      <p class="sub">${warn ? `Warns the team at ${warn}. ` : ""}Pauses new GPU work at ${usd(doc.pause_usd)}.</p>
    </div>
    <div class="stat"><h2 class="stat-title">Since the last Clear</h2>
      <p class="big">${usd(doc.counted_since_clear_usd)}</p>
      <p class="sub">The spend that the pause counts, within 24 hours.</p>
    </div>
    <div class="stat"><h2 class="stat-title">Inference last counted</h2>
      <p class="big">${doc.last_counted_at ? when(doc.last_counted_at) : "Never"}</p>
      <p class="sub">The API counts Inference's containers each minute. It is not Modal's bill.</p>
    </div>
  </div>`;
}

function changeText(change) {
  if (!change) return "No change yet.";
  const name = CHANGE_NAMES[change.kind] || change.kind;
  const who = change.kind === "pause" ? "by the platform" : `by ${change.by}`;
  return `${name} ${who}, ${when(change.at)}${change.reason ? `: ${change.reason}` : "."}`;
}

function Stop({ doc, onLock, onClear }) {
  const last = doc.changes[0];
  return html`<section class="part spend-stop" aria-labelledby="spend-stop-title">
    <h2 id="spend-stop-title">Spend stop</h2>
    <div class="spend-stop-row">
      <p class="spend-state" role="status">
        <span class=${`badge ${doc.locked ? "badge-paused" : "badge-active"}`}>${doc.locked ? "Paused" : "Running"}</span>
        ${doc.locked ? " New GPU work is paused." : " New GPU work runs."}
      </p>
      <div class="actions">
        <button type="button" class="danger" onClick=${onLock}>Lock</button>
        <button type="button" onClick=${onClear}>Clear</button>
      </div>
    </div>
    <p class="sub">Last change: ${changeText(last)}</p>
  </section>`;
}

function LockDialog({ open, onLock, onClose }) {
  const [reason, setReason] = useState("");
  const { error, busy, submit, reset } = useSubmit(() => onLock(reason.trim()));
  useEffect(() => { if (open) { setReason(""); reset(); } }, [open]);
  const errors = splitError(error, ["reason"]);
  return html`<${Dialog} open=${open} title="Lock the Spend stop" onCancel=${onClose}>
    <${Form} onSubmit=${submit}>
      <p>New GPU work gets 429 spend_cap until an admin selects Clear. Work that runs finishes, and queued work waits.</p>
      <${Field} label="Reason" optional value=${reason} onInput=${setReason} maxlength="200" autocomplete="off"
        error=${errors.field.reason} />
      <${FormError} message=${errors.form} />
      <div class="actions actions-end">
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="danger" disabled=${busy}>Lock</button>
      </div>
    </${Form}>
  </${Dialog}>`;
}

function Table({ caption, head, rows, empty }) {
  return html`<div class="table-scroll" tabindex="0" role="region" aria-label=${caption}>
    <table class="table">
      <caption class="visually-hidden">${caption}</caption>
      <thead><tr>${head.map(([label, kind]) => html`<th scope="col" class=${kind || ""}>${label}</th>`)}</tr></thead>
      <tbody>${rows.length ? rows : html`<tr><td colspan=${head.length}>${empty}</td></tr>`}</tbody>
    </table>
  </div>`;
}

function Part({ title, children }) {
  return html`<section class="part part-wide"><h2>${title}</h2>${children}</section>`;
}

function perDay(found, names) {
  const series = found.models.map((model, index) => ({ key: model, label: nameOf(names, model), color: COLORS[index % COLORS.length] }));
  const others = found.days.some((each) => each.other_usd > 0);
  if (others) series.push({ key: OTHER_KEY, label: "Other models", color: OTHERS });
  const days = found.days.map((each) => ({ day: each.day, ...each.usd, [OTHER_KEY]: each.other_usd }));
  const describe = (point) => {
    const spent = series.reduce((sum, entry) => sum + (point[entry.key] || 0), 0);
    const parts = series.filter((entry) => point[entry.key] > 0).map((entry) => `${entry.label} ${usd(point[entry.key])}`);
    return `${day(point.day)}: ${usd(spent)}${parts.length ? `, ${parts.join(", ")}` : ""}`;
  };
  return { series, days, describe };
}

function axisUsd(value) {
  return value >= 1000 ? `$${number(Math.round(value / 100) / 10)}K` : `$${number(value)}`;
}

function SpendParts({ doc }) {
  const names = useModels();
  const chart = perDay(doc.per_day, names);
  return html`<div class="parts spend-parts">
    <${Part} title="Last 24 hours by model"><${Table} caption="Last 24 hours by model" empty="No model ran in the last 24 hours."
      head=${[["Model"], ["Spend", "num"], ["GPU hours", "num"]]}
      rows=${doc.by_model.map((line) => html`<tr><td><${ModelId} id=${line.model} models=${names} /></td><td class="num">${usd(line.usd)}</td>
        <td class="num">${number(line.gpu_hours)}</td></tr>`)} /></${Part}>
    <${Part} title="GPU spend per day">
      <p class="sub">${day(doc.per_day.from)} to ${day(doc.per_day.to)}, the models that cost the most.</p>
      ${chart.series.length
        ? html`<${DayChart} days=${chart.days} label="GPU spend per day" series=${chart.series} value=${usd} axis=${axisUsd}
            describe=${chart.describe} empty="No GPU spend on these days." />`
        : html`<p class="note">No GPU spend on these days.</p>`}
    </${Part}>
    <${Part} title="Who used each model, last 48 hours"><${Table} caption="Who used each model, last 48 hours"
      empty="No Completions in the last 48 hours."
      head=${[["Model"], ["User"], ["Completions", "num"], ["Tokens", "num"], ["Part of its spend", "num"]]}
      rows=${doc.who_used.map((line) => html`<tr><td><${ModelId} id=${line.model} models=${names} /></td>
        <td><${Link} to=${`/admin/users/${line.user_id}`}>${line.email || line.name}</${Link}></td>
        <td class="num">${number(line.completions)}</td><td class="num">${number(line.tokens)}</td>
        <td class="num">${usd(line.usd)}</td></tr>`)} /></${Part}>
    <${Part} title="Changes of the stop"><${Table} caption="Changes of the stop" empty="The stop has not changed yet."
      head=${[["When"], ["Change"], ["By"], ["Reason"]]}
      rows=${doc.changes.map((change) => html`<tr><td class="nowrap">${day(change.at)}, ${utcClock(new Date(change.at))}</td>
        <td>${CHANGE_NAMES[change.kind] || change.kind}${change.kind === "pause" && change.usd !== null ? ` at ${usd(change.usd)}` : ""}</td>
        <td>${change.kind === "pause" ? "The platform" : change.by}</td><td>${change.reason || "—"}</td></tr>`)} /></${Part}>
  </div>`;
}

export default function Spend({ route, days }) {
  const [state, reload] = usePolledRead(address(days));
  const [dialog, setDialog] = useState(null); // "lock" | "clear"
  const close = () => setDialog(null);
  async function lock(reason) {
    await api("v1/admin/spend/lock", { method: "POST", body: reason ? { reason } : {} });
    close();
    reload();
  }
  async function clear() {
    await api("v1/admin/spend/clear", { method: "POST", body: {} });
    close();
    reload();
  }
  const doc = state.doc;
  if (!doc) {
    return state.error
      ? html`<${LoadFailed} text=${`Could not read the spend: ${state.error}`} onRetry=${reload} />`
      : html`<p class="loading" role="status">Loading…</p>`;
  }
  return html`<div class="spend">
    <${Top} doc=${doc} />
    <${Stop} doc=${doc} onLock=${() => setDialog("lock")} onClear=${() => setDialog("clear")} />
    ${state.error ? html`<p class="form-error" role="status">Could not refresh: ${state.error}</p>` : null}
    <${SpendParts} doc=${doc} />
    <${LockDialog} open=${dialog === "lock"} onLock=${lock} onClose=${close} />
    <${ConfirmDialog} subject=${dialog === "clear" ? "clear" : null} title="Clear the Spend stop?"
      text="New GPU work runs again, and the pause counts the spend from now." action="Clear"
      onConfirm=${clear} onClose=${close} />
  </div>`;
}
