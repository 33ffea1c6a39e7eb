// The parts of a Usage document (GET /account/usage, or an admin's GET /v1/admin/users/<id>/usage-page):
// its filters, its cards, tokens per day, and the tables by model, source and key, the newest
// Completions and the Budget history. Usage shows them to the User; A User's page on Admin shows the
// same parts of that User's document, so both count alike. `words` names the account as the reader
// calls it ("your", or the admin's "the account"); `pick(changes)` writes the choice to the address.
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { DayChart } from "../chart.js";
import { DayPicker } from "./days.js";
import { capital, day, duration, lastUsed, number, stamp } from "./format.js";
import { Link } from "./link.js";
import { Meter } from "./meter.js";
import { ModelId, ModelSelect } from "./model_name.js";

const REFRESH_MS = 60000;
const SOURCES = { api: "API", playground: "Playground", loom: "Loom", jobs: "Jobs", harvests: "Harvests" };
const COUNTED = { reported: "Reported", partial: "Partial", held: "Held" };

/** The User's own words (Usage). */
export const OWN = {
  narrowedAllowance: "Your account's monthly allowance", narrowedBudget: "Your account's token budget",
  requestMore: true, noBudgetChanges: "No changes to your Budget yet.", ownBudget: "Your Budget",
};

/** The query of a usage read: `range`, or `from` and `to`, then `key` and `model` when chosen. */
export function usageQuery(choice) {
  const query = new URLSearchParams();
  if (choice.from && choice.to) { query.set("from", choice.from); query.set("to", choice.to); }
  else query.set("range", choice.range || "this_month");
  if (choice.key) query.set("key", choice.key);
  if (choice.model) query.set("model", choice.model);
  return query;
}

/** [state, load, retry]: the document at `path`, read again every minute. state.failed after a
 * failed read (the last document stays), state.error a refusal of the choice (400), state.reason
 * what failed. A null `path` reads nothing. */
export function useUsageDoc(path) {
  const [state, setState] = useState({ doc: null, failed: false, error: null, reason: null });
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
    if (!path) return undefined; // nothing to read (a tab that reads its own numbers)
    load();
    const timer = setInterval(load, REFRESH_MS);
    return () => clearInterval(timer);
  }, [path]);
  // Try again after a failed first read: "Loading…" until the answer, not the old failure.
  const retry = () => { setState((old) => ({ ...old, failed: false, reason: null })); load(); };
  return [state, load, retry];
}

/** The keys to choose from: those listed, and each key of the document's By key (a revoked one too). */
export function keyChoices(keys, doc) {
  const all = [...keys];
  for (const k of doc ? doc.by_key : []) if (!all.some((c) => c.id === k.id)) all.push(k);
  return all;
}

export function UsageFilters({ name, choice, keys, models, pick }) {
  const keyName = keys.find((k) => k.id === choice.key)?.name;
  return html`<div class="filters">
    <${DayPicker} name=${name} days=${choice} pick=${pick} />
    <div class="selects">
      <div class="field field-inline"><label for=${`${name}-key`}>Key</label>
        <select id=${`${name}-key`} value=${choice.key} title=${keyName || "All keys"} onChange=${(e) => pick({ key: e.currentTarget.value })}>
          <option value="">All keys</option>
          ${keys.map((k) => html`<option value=${k.id}>${k.name}${k.status === "revoked" ? " (revoked)" : ""}</option>`)}
        </select></div>
      <div class="field field-inline"><label for=${`${name}-model`}>Model</label>
        <${ModelSelect} id=${`${name}-model`} value=${choice.model} models=${models} onChange=${(model) => pick({ model })} /></div>
    </div>
  </div>`;
}

/** A model's or a key's name on one line: cut short with an ellipsis, the whole name on hover. */
export function Name({ text }) {
  return text ? html`<span class="cut-name" title=${text}>${text}</span>` : "—";
}

export function Stat({ title, children }) {
  return html`<div class="stat"><h2 class="stat-title">${title}</h2>${children}</div>`;
}

export function Cards({ doc, narrowed, words = OWN }) {
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
    <${Stat} title=${narrowed ? words.narrowedAllowance : "Monthly allowance"}>
      <p class="big">${number(allowance.left)}</p>
      <p class="sub">left of ${number(allowance.total)} · resets on ${day(allowance.resets_on)}</p>
      <${Meter} used=${allowance.used} total=${allowance.total} label="Monthly allowance used" />
    </${Stat}>
    <${Stat} title=${narrowed ? words.narrowedBudget : "Token budget"}>
      <p class="big">${number(doc.budget.left)}</p>
      <p class="sub">tokens left${words.requestMore ? html` · <${Link} to="/usage/request">Request more tokens</${Link}>` : null}</p>
    </${Stat}>
  </div>`;
}

export function Table({ caption, head, rows, empty, dense }) {
  return html`<div class="table-scroll" tabindex="0" role="region" aria-label=${caption}><table class=${dense ? "table dense" : "table"}>
    <caption class="visually-hidden">${caption}</caption>
    <thead><tr>${head.map(([label, cls]) => html`<th scope="col" class=${cls || ""}>${label}</th>`)}</tr></thead>
    <tbody>${rows.length ? rows : html`<tr><td colspan=${head.length}>${empty}</td></tr>`}</tbody>
  </table></div>`;
}

export function Part({ title, children, wide }) {
  return html`<section class=${`part${wide ? " part-wide" : ""}`}><h2>${title}</h2>${children}</section>`;
}

export function Breakdown({ doc, choice, pick, words = OWN, models = [] }) {
  const byKey = doc.by_key.map((k) => html`<tr>
    <td><button type="button" class="link-button cut-name" title=${k.name} aria-pressed=${choice.key === k.id ? "true" : "false"}
      onClick=${() => pick({ key: k.id })}>${k.name}</button></td>
    <td>${capital(k.status)}</td><td class="num">${number(k.input)}</td><td class="num">${number(k.output)}</td>
    <td class="num">${number(k.last_month)}</td><td class="num">${number(k.all_time)}</td>
    <td class="num">${k.budget_left === null || k.budget_left === undefined ? "—" : number(k.budget_left)}</td>
    <td class="nowrap">${lastUsed(k.last_used_at)}</td></tr>`);
  return html`<div class="parts">
    <${Part} title="By model"><${Table} caption="By model" empty="No Completions."
      head=${[["Model"], ["Input", "num"], ["Output", "num"], ["Total", "num"]]}
      rows=${doc.by_model.map((m) => html`<tr><td><${ModelId} id=${m.model} models=${models} /></td><td class="num">${number(m.input)}</td>
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
      rows=${doc.recent.map((c) => html`<tr><td class="nowrap">${stamp(c.started_at)}</td><td><${ModelId} id=${c.model} models=${models} /></td>
        <td>${SOURCES[c.source] || c.source}</td><td><${Name} text=${c.key} /></td><td class="num">${number(c.input)}</td>
        <td class="num">${number(c.output)}</td><td>${COUNTED[c.counted] || c.counted}</td>
        <td class="num">${duration(c.duration_ms)}</td><td>${capital(c.status)}</td></tr>`)} /></${Part}>
    <${Part} title="Budget history" wide><${Table} caption="Budget history, newest 100" empty=${words.noBudgetChanges}
      head=${[["When (UTC)"], ["Tokens", "num"], ["Change"], ["Key"], ["Note"]]}
      rows=${doc.budget_changes.map((b) => html`<tr><td class="nowrap">${stamp(b.at)}</td>
        <td class="num">${b.tokens > 0 ? "+" : ""}${number(b.tokens)}</td><td>${capital(b.what)}</td>
        <td><${Name} text=${b.key || words.ownBudget} /></td><td>${b.note || ""}</td></tr>`)} /></${Part}>
  </div>`;
}

/** The numbers of a read document, from the days it counts to the Budget history. */
export function UsageNumbers({ doc, choice, pick, words = OWN, models = [] }) {
  return html`<p class="range-note">${day(doc.from)} to ${day(doc.to)}, in UTC days</p>
    <${Cards} doc=${doc} narrowed=${Boolean(choice.key || choice.model)} words=${words} />
    <${Part} title="Tokens per day" wide><${DayChart} days=${doc.days} /></${Part}>
    <${Breakdown} doc=${doc} choice=${choice} pick=${pick} words=${words} models=${models} />`;
}
