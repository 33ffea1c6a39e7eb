// One name for each model in every page of the App (spec: "The App names each model by a short name,
// such as Llama 3.1 8B ... The model's full id shows when you hover over its name"; the Playground:
// "Hover over a model in the model list to see its id, and use that id as `model` in the API").
// The id, such as llama-8b or smollm2-135m, is what the ledger records, the address and exports keep,
// and a request sends; the short name comes from the served name (the weights). `models` is
// GET account/models' data: [{ id, name }], where name is the served name.
import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";
import { html } from "../html.js";

const SHORT_NAMES = {
  "meta-llama/Llama-3.1-8B": "Llama 3.1 8B",
  "meta-llama/Llama-3.1-405B": "Llama 3.1 405B",
  "arcee-ai/Trinity-Large-TrueBase": "Trinity Large",
};
const MAKERS = { "meta-llama": "Meta", "arcee-ai": "Arcee", HuggingFaceTB: "Hugging Face", acs: "ACS" };
/** "Llama 3.1 8B" for meta-llama/Llama-3.1-8B; other models by their own name, dashes as spaces. */
export function shortName(model) {
  if (!model) return "";
  const served = model.name || model.id;
  if (SHORT_NAMES[served]) return SHORT_NAMES[served];
  const tail = served.includes("/") ? served.slice(served.indexOf("/") + 1) : served;
  return tail.replace(/[-_]+/g, " ");
}

export function maker(model) {
  const served = (model && (model.name || model.id)) || "";
  const org = served.includes("/") ? served.slice(0, served.indexOf("/")) : "";
  return MAKERS[org] || org || "";
}

/** The short name of the model `id`, or the id itself for a model that is no longer served. */
export function nameOf(models, id) {
  const model = (models || []).find((m) => m.id === id);
  return model ? shortName(model) : id;
}

/** A model's short name on one line (cut with an ellipsis), its id on hover. */
export function ModelId({ id, models }) {
  return id ? html`<span class="cut-name" title=${id}>${nameOf(models, id)}</span>` : "—";
}

/** The models to choose from: each served one, then each that a document counted and that is no
 * longer served, so that a filter can always name what a table shows. */
export function modelChoices(models, counted = []) {
  const all = [...(models || [])];
  for (const id of counted) if (id && !all.some((m) => m.id === id)) all.push({ id, name: id });
  return all;
}

/** A Model filter: "All models", then each model by its short name; the chosen one's id on hover. */
export function ModelSelect({ id, value, models, onChange }) {
  return html`<select id=${id} value=${value} title=${value || "All models"}
      onChange=${(e) => onChange(e.currentTarget.value)}>
      <option value="">All models</option>
      ${models.map((m) => html`<option value=${m.id} title=${m.id}>${shortName(m)}</option>`)}
    </select>`;
}

/** The served models (GET account/models' data), read once by the page that names them; [] when the
 * read fails, so that each model is named by its id. */
export function useModels() {
  const [models, setModels] = useState(null);
  useEffect(() => {
    api("account/models").then((answer) => setModels(answer.data)).catch(() => setModels([]));
  }, []);
  return models;
}

/** Models by their short names, apart with commas; their ids on hover. */
export function modelList(models, ids) {
  return (ids || []).map((id) => nameOf(models, id)).join(", ");
}
