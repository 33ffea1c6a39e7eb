// One name for each model in the counting pages (issue 37): its id, such as smollm2-135m, which is
// what the ledger records, the address keeps and a request may send; the served name (the weights,
// such as HuggingFaceTB/SmolLM2-135M-Instruct) shows on hover. `models` is GET account/models' data:
// [{ id, name }], where name is the served name.
import { html } from "../html.js";

/** The served name of the model `id`, or the id itself for a model that is no longer served. */
export function servedName(models, id) {
  const model = (models || []).find((m) => m.id === id);
  return (model && model.name) || id;
}

/** A model's id on one line (cut with an ellipsis), its served name on hover. */
export function ModelId({ id, models }) {
  return id ? html`<span class="cut-name" title=${servedName(models, id)}>${id}</span>` : "—";
}

/** The models to choose from: each served one, then each that a document counted and that is no
 * longer served, so that a filter can always name what a table shows. */
export function modelChoices(models, counted = []) {
  const all = [...(models || [])];
  for (const id of counted) if (id && !all.some((m) => m.id === id)) all.push({ id, name: id });
  return all;
}

/** A Model filter: "All models", then each model by its id; the chosen one's served name on hover. */
export function ModelSelect({ id, value, models, onChange }) {
  return html`<select id=${id} value=${value} title=${value ? servedName(models, value) : "All models"}
      onChange=${(e) => onChange(e.currentTarget.value)}>
      <option value="">All models</option>
      ${models.map((m) => html`<option value=${m.id} title=${m.name || m.id}>${m.id}</option>`)}
    </select>`;
}
