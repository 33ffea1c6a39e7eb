// Usage: the tokens used and left, for chosen days, key and model. The
// address keeps the choice; the numbers are read again every minute.
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { DayChart } from "../chart.js";
import { DayPicker, daysOf } from "../components/days.js";
import { capital, day, duration, lastUsed, number, stamp, utcClock } from "../components/format.js";
import { Link } from "../components/link.js";
import { Meter } from "../components/meter.js";
import { PageHeader } from "../notice.js";
import { setQuery } from "../router.js";

const REFRESH_MS = 60000;
const SOURCES = { api: "API", playground: "Playground", loom: "Loom", jobs: "Jobs", harvests: "Harvests" };
const COUNTED = { reported: "Reported", partial: "Partial", held: "Held" };

function choiceOf(query) {
  return { ...daysOf(query), key: query.get("key") || "", model: query.get("model") || "" };
}

function usagePath(choice) {
  const query = new URLSearchParams();
  if (choice.from && choice.to) { query.set("from", choice.from); query.set("to", choice.to); }
  else query.set("range", choice.range || "this_month");
  if (choice.key) query.set("key", choice.key);
  if (choice.model) query.set("model", choice.model);
  return `account/usage?${query}`;
}

function useUsage(choice) {
  const [state, setState] = useState({ doc: null, failed: false, error: null, reason: null });
  const path = usagePath(choice);
  const load = async () => {
    try {
      const doc = await api(path);
      setState({ doc, failed: false, error: null, reason: null });
    } catch (failure) {
      setState((old) => ({ ...old, failed: true, error: failure.status === 400 ? failure.message : null,
        reason: failure.message }));
    }
  };
  useEffect(() => {
    load();
    const timer = setInterval(load, REFRESH_MS);
    return () => clearInterval(timer);
  }, [path]);
  // Try again after a failed first read: "Loading…" until the answer, not the old failure.
  const retry = () => { setState((old) => ({ ...old, failed: false, reason: null })); load(); };
  return [state, load, retry];
}

function useChoices() {
  const [keys, setKeys] = useState([]);
  const [models, setModels] = useState([]);
  useEffect(() => {
    api("account/keys").then((answer) => setKeys(answer.data)).catch(() => {});
    api("account/models").then((answer) => setModels(answer.data)).catch(() => {});
  }, []);
  return [keys, models];
}

function Filters({ choice, keys, models }) {
  const pick = (changes) => setQuery({ ...choice, ...changes });
  const keyName = keys.find((k) => k.id === choice.key)?.name;
  const model = models.find((m) => m.id === choice.model);
  return html`<div class="filters">
    <${DayPicker} name="usage" days=${choice} pick=${pick} />
    <div class="selects">
      <div class="field field-inline"><label for="usage-key">Key</label>
        <select id="usage-key" value=${choice.key} title=${keyName || "All keys"} onChange=${(e) => pick({ key: e.currentTarget.value })}>
          <option value="">All keys</option>
          ${keys.map((k) => html`<option value=${k.id}>${k.name}${k.status === "revoked" ? " (revoked)" : ""}</option>`)}
        </select></div>
      <div class="field field-inline"><label for="usage-model">Model</label>
        <select id="usage-model" value=${choice.model} title=${model ? model.name || model.id : "All models"}
          onChange=${(e) => pick({ model: e.currentTarget.value })}>
          <option value="">All models</option>
          ${models.map((m) => html`<option value=${m.id}>${m.name || m.id}</option>`)}
        </select></div>
    </div>
  </div>`;
}

/** A model's or a key's name on one line: cut short with an ellipsis, the whole name on hover. */
function Name({ text }) {
  return text ? html`<span class="cut-name" title=${text}>${text}</span>` : "—";
}

function Stat({ title, children }) {
  return html`<div class="stat"><h2 class="stat-title">${title}</h2>${children}</div>`;
}

function Cards({ doc, narrowed }) {
  const allowance = doc.allowance;
  return html`<div class="stats">
    <${Stat} title="Tokens used">
      <p class="big">${number(doc.tokens.total)}</p>
      <p class="sub">${number(doc.tokens.input)} input · ${number(doc.tokens.output)} output</p>
    </${Stat}>
    <${Stat} title="Completions">
      <p class="big">${number(doc.completions.count)}</p>
      <p class="sub">${number(doc.completions.running)} running</p>
    </${Stat}>
    ${doc.key_budget ? html`<${Stat} title="This key's token budget">
      <p class="big">${number(doc.key_budget.left)}</p><p class="sub">tokens left</p>
    </${Stat}>` : null}
    <${Stat} title=${narrowed ? "Your account's monthly allowance" : "Monthly allowance"}>
      <p class="big">${number(allowance.left)}</p>
      <p class="sub">left of ${number(allowance.total)} · resets on ${day(allowance.resets_on)}</p>
      <${Meter} used=${allowance.used} total=${allowance.total} label="Monthly allowance used" />
    </${Stat}>
    <${Stat} title=${narrowed ? "Your account's token budget" : "Token budget"}>
      <p class="big">${number(doc.budget.left)}</p>
      <p class="sub">tokens left · <${Link} to="/usage/request">Request more tokens</${Link}></p>
    </${Stat}>
  </div>`;
}

function Table({ caption, head, rows, empty, dense }) {
  return html`<div class="table-scroll" tabindex="0" role="region" aria-label=${caption}><table class=${dense ? "table dense" : "table"}>
    <caption class="visually-hidden">${caption}</caption>
    <thead><tr>${head.map(([label, cls]) => html`<th scope="col" class=${cls || ""}>${label}</th>`)}</tr></thead>
    <tbody>${rows.length ? rows : html`<tr><td colspan=${head.length}>${empty}</td></tr>`}</tbody>
  </table></div>`;
}

function Part({ title, children, wide }) {
  return html`<section class=${`part${wide ? " part-wide" : ""}`}><h2>${title}</h2>${children}</section>`;
}

function Breakdown({ doc, choice }) {
  const byKey = doc.by_key.map((k) => html`<tr>
    <td><button type="button" class="link-button cut-name" title=${k.name} aria-pressed=${choice.key === k.id ? "true" : "false"}
      onClick=${() => setQuery({ ...choice, key: k.id })}>${k.name}</button></td>
    <td>${capital(k.status)}</td><td class="num">${number(k.input)}</td><td class="num">${number(k.output)}</td>
    <td class="num">${number(k.last_month)}</td><td class="num">${number(k.all_time)}</td>
    <td class="num">${k.budget_left === null || k.budget_left === undefined ? "—" : number(k.budget_left)}</td>
    <td class="nowrap">${lastUsed(k.last_used_at)}</td></tr>`);
  return html`<div class="parts">
    <${Part} title="By model"><${Table} caption="By model" empty="No Completions."
      head=${[["Model"], ["Input", "num"], ["Output", "num"], ["Total", "num"]]}
      rows=${doc.by_model.map((m) => html`<tr><td><${Name} text=${m.model} /></td><td class="num">${number(m.input)}</td>
        <td class="num">${number(m.output)}</td><td class="num">${number(m.total)}</td></tr>`)} /></${Part}>
    <${Part} title="By source"><${Table} caption="By source" empty="No Completions."
      head=${[["Source"], ["Completions", "num"], ["Input", "num"], ["Output", "num"], ["Total", "num"]]}
      rows=${doc.by_source.map((s) => html`<tr><td>${SOURCES[s.source] || s.source}</td><td class="num">${number(s.completions)}</td>
        <td class="num">${number(s.input)}</td><td class="num">${number(s.output)}</td><td class="num">${number(s.total)}</td></tr>`)} /></${Part}>
    <${Part} title="By key" wide><${Table} caption="By key" empty="No key ran Completions on these days."
      head=${[["Key"], ["Status"], ["Input", "num"], ["Output", "num"], ["Last month", "num"], ["All time", "num"], ["Budget", "num"], ["Last used"]]}
      rows=${byKey} /></${Part}>
    <${Part} title="Completions" wide><${Table} caption="Completions, newest 100" empty="No Completions on these days." dense
      head=${[["Started (UTC)"], ["Model"], ["Source"], ["Key"], ["Input", "num"], ["Output", "num"], ["Counted"], ["Duration", "num"], ["Status"]]}
      rows=${doc.recent.map((c) => html`<tr><td class="nowrap">${stamp(c.started_at)}</td><td><${Name} text=${c.model} /></td>
        <td>${SOURCES[c.source] || c.source}</td><td><${Name} text=${c.key} /></td><td class="num">${number(c.input)}</td>
        <td class="num">${number(c.output)}</td><td>${COUNTED[c.counted] || c.counted}</td>
        <td class="num">${duration(c.duration_ms)}</td><td>${capital(c.status)}</td></tr>`)} /></${Part}>
    <${Part} title="Budget history" wide><${Table} caption="Budget history, newest 100" empty="No changes to your Budget yet."
      head=${[["When (UTC)"], ["Tokens", "num"], ["Change"], ["Key"], ["Note"]]}
      rows=${doc.budget_changes.map((b) => html`<tr><td class="nowrap">${stamp(b.at)}</td>
        <td class="num">${b.tokens > 0 ? "+" : ""}${number(b.tokens)}</td><td>${capital(b.what)}</td>
        <td><${Name} text=${b.key || "Your Budget"} /></td><td>${b.note || ""}</td></tr>`)} /></${Part}>
  </div>`;
}

export default function Usage({ route }) {
  const choice = choiceOf(route.query);
  const [state, load, retry] = useUsage(choice);
  const [keys, models] = useChoices();
  const doc = state.doc;
  const keyChoices = [...keys];
  for (const k of doc ? doc.by_key : []) if (!keyChoices.some((c) => c.id === k.id)) keyChoices.push(k);
  // A first read that failed for another reason than the days chosen: no numbers to keep, so the
  // page says what failed and offers another try instead of filters over nothing.
  const unread = !doc && state.failed && !state.error;
  const side = html`${doc ? html`<span class="updated">Updated ${utcClock(new Date(doc.updated_at))}</span>` : null}
    <button type="button" onClick=${doc ? load : retry}>Refresh</button>
    ${doc && state.failed ? html`<span class="warn-text" role="status">Could not refresh</span>` : null}`;
  if (unread) {
    return html`<${PageHeader} title="Usage">${side}</${PageHeader}>
      <div class="load-failed" role="alert">
        <h2>Could not read your usage</h2>
        <p>${state.reason || "The App did not answer."} The page has no numbers to show yet.</p>
        <button type="button" class="primary" onClick=${retry}>Try again</button>
      </div>`;
  }
  return html`<${PageHeader} title="Usage">${side}</${PageHeader}>
    <${Filters} choice=${choice} keys=${keyChoices} models=${models} />
    ${state.error ? html`<p class="form-error" role="alert">${state.error}</p>` : null}
    ${doc ? html`<p class="range-note">${day(doc.from)} to ${day(doc.to)}, in UTC days</p>
      <${Cards} doc=${doc} narrowed=${Boolean(choice.key || choice.model)} />
      <${Part} title="Tokens per day" wide><${DayChart} days=${doc.days} /></${Part}>
      <${Breakdown} doc=${doc} choice=${choice} />` : state.failed ? null : html`<p role="status">Loading…</p>`}`;
}
