// The Runs table (spec: "Find your Runs again"): the newest 100 Runs, newest first, with their
// number, status, model, settings, text, tokens and time; the Runs of one Run all under a row that
// names them, with Restore; boxes to choose Runs (Compare N runs, Export chosen); and the menu at
// the end of each row.
import { html } from "../html.js";
import { Menu } from "../components/menu.js";
import { number, when } from "../components/format.js";
import { ModelName } from "./models.js";
import { STATUS, outputText } from "./output.js";
import { settingsJson } from "./fields.js";
import { exportAddress } from "./runs.js";

/** "4 and 5", "4, 5 and 6". */
export function numbersWords(numbers) {
  if (numbers.length <= 1) return numbers.join("");
  return `${numbers.slice(0, -1).join(", ")} and ${numbers[numbers.length - 1]}`;
}

function settingsWords(request) {
  const { model, prompt, stream, ...rest } = request;
  return Object.entries(rest).map(([key, value]) => {
    if (key === "apply_steering_vectors") return `steer ${value.length}`;
    return `${key} ${typeof value === "object" ? JSON.stringify(value) : value}`;
  }).join(", ");
}

/** The rows in order: a group's head before its Runs, the Runs of a group together. */
export function rowsOf(runs) {
  const rows = [];
  const seen = new Set();
  for (const run of runs) {
    if (!run.group_id) { rows.push({ run }); continue; }
    if (seen.has(run.group_id)) continue;
    seen.add(run.group_id);
    const members = runs.filter((r) => r.group_id === run.group_id).sort((a, b) => a.number - b.number);
    rows.push({ group: run.group_id, members });
    for (const member of members) rows.push({ run: member, inGroup: true });
  }
  return rows;
}

export function exportItems(ids) {
  return [
    { label: "JSON", href: exportAddress("json", ids) },
    { label: "JSONL", href: exportAddress("jsonl", ids) },
    { label: "Text", href: exportAddress("text", ids) },
  ];
}

function RunRow({ run, models, chosen, onChoose, shown, actions, inGroup }) {
  const text = outputText(run);
  const usage = run.usage;
  const items = [
    { label: "Show", onSelect: () => actions.show(run) },
    { label: "Use these settings", onSelect: () => actions.use(run) },
    { label: "Copy settings", onSelect: () => actions.copy(settingsJson(run.request), "the settings") },
    { label: "Copy prompt", onSelect: () => actions.copy(typeof run.request.prompt === "string" ? run.request.prompt : JSON.stringify(run.request.prompt), "the prompt") },
    text ? { label: "Copy output", onSelect: () => actions.copy(text, "the output") } : null,
    { label: "Copy as API request", onSelect: () => actions.curl(run) },
    { label: "Delete", onSelect: () => actions.remove(run), danger: true },
  ];
  const model = models.find((m) => m.id === run.model);
  return html`<tr class=${`${inGroup ? "in-group" : ""}${shown ? " row-shown" : ""}`} aria-current=${shown ? "true" : undefined}>
    <td class="choose"><input type="checkbox" aria-label=${`Choose run ${run.number}`} checked=${chosen} onChange=${(e) => onChoose(run.id, e.currentTarget.checked)} /></td>
    <td class="num"><button type="button" class="link-button" onClick=${() => actions.show(run)} aria-label=${`Show run ${run.number}`}>${run.number}</button></td>
    <td><span class=${`badge badge-run-${run.status}`}>${STATUS[run.status] || run.status}</span></td>
    <td class="nowrap"><${ModelName} model=${model} id=${run.model} /></td>
    <td class="run-settings wide"><span class="cut" title=${settingsWords(run.request)}>${settingsWords(run.request)}</span></td>
    <td class="run-snippet"><span class="cut" title=${text}>${text || (run.error ? run.error.message : "")}</span></td>
    <td class="num nowrap">${usage ? `${number(usage.prompt_tokens)} · ${number(usage.completion_tokens)}` : "—"}</td>
    <td class="nowrap wide">${when(run.created_at)}</td>
    <td class="row-menu"><${Menu} label=${html`<span aria-hidden="true">⋯</span>`} ariaLabel=${`Actions of run ${run.number}`} items=${items} floating=${true} /></td>
  </tr>`;
}

export function RunsTable({ runs, models, chosen, onChoose, shownIds, actions, restoreBusy, failed }) {
  const chosenIds = (runs || []).filter((run) => chosen.has(run.id)).map((run) => run.id);
  const head = html`<div class="runs-toolbar">
    <h2 id="runs-title">Runs</h2>
    <div class="runs-tools">
      ${chosenIds.length >= 2 ? html`<button type="button" onClick=${() => actions.compare(chosenIds)}>Compare ${chosenIds.length} runs</button>` : null}
      ${chosenIds.length ? html`<${Menu} label="Export chosen" items=${exportItems(chosenIds)} />` : null}
      ${runs && runs.length ? html`<${Menu} label="Export every run" items=${exportItems(null)} />` : null}
    </div>
  </div>`;
  if (runs === null) return html`<section class="runs" aria-labelledby="runs-title">${head}<p role="status">Loading…</p></section>`;
  if (!runs.length) return html`<section class="runs" aria-labelledby="runs-title">${head}<p class="muted">No Runs yet. Your Runs show here, newest first.</p></section>`;
  const rows = rowsOf(runs);
  return html`<section class="runs" aria-labelledby="runs-title">${head}
    <div class="table-scroll" tabindex="0" role="region" aria-label="The Runs table">
      <table class="table runs-table">
        <caption class="visually-hidden">Runs, newest first</caption>
        <thead><tr>
          <th scope="col"><span class="visually-hidden">Choose</span></th>
          <th scope="col" class="num">Run</th><th scope="col">Status</th><th scope="col">Model</th>
          <th scope="col" class="wide">Settings</th><th scope="col">Text</th>
          <th scope="col" class="num">Tokens</th><th scope="col" class="wide">Time</th>
          <th scope="col"><span class="visually-hidden">Actions</span></th>
        </tr></thead>
        <tbody>${rows.map((row) => row.group
          ? html`<tr class="group-row" key=${row.group}><td colspan="9"><div class="group-head">
              <span class="group-name">Comparison of runs ${numbersWords(row.members.map((r) => r.number))}</span>
              <button type="button" disabled=${restoreBusy} onClick=${() => actions.restore(row.members)}>Restore</button>
              ${restoreBusy ? html`<span class="muted">Restore waits until no Run of the page is running.</span>` : null}
            </div></td></tr>`
          : html`<${RunRow} key=${row.run.id} run=${row.run} models=${models} chosen=${chosen.has(row.run.id)} onChoose=${onChoose}
              shown=${shownIds.includes(row.run.id)} actions=${actions} inGroup=${row.inGroup} />`)}</tbody>
      </table>
    </div>
    ${failed ? html`<p class="form-error" role="status">Could not refresh.</p>` : null}
  </section>`;
}
