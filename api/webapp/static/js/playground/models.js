// The served models as the Playground shows them: a short name (the id on hover; components/model_name.js,
// as every page names them), the maker's mark, and whether a model is Warm or how far its start has got.
import { api } from "../api.js";
import { html } from "../html.js";
import { maker, shortName, useModels } from "../components/model_name.js";

export { maker, shortName, useModels };

// About how long a start takes, by the GPUs that it loads (spec: "Cold starts and long requests":
// the 8-GPU models took 17.6 and 25 minutes in testing).
const START_S = { one: 6 * 60, eight: 25 * 60 };

/** The maker's mark before a model's name: its initial in a round badge (no image to load). */
export function ModelName({ model, id }) {
  const name = model ? shortName(model) : id;
  const by = model ? maker(model) : "";
  return html`<span class="model-name" title=${model ? model.id : id}>
    ${by ? html`<span class=${`maker maker-${by.toLowerCase().replace(/\W+/g, "")}`} aria-hidden="true">${by[0]}</span>` : null}
    <span>${name}</span></span>`;
}

export function modelStatus(id) {
  return api(`account/models/${encodeURIComponent(id)}/status`);
}

/** The first Warm model, else the default one (spec: "A new Playground starts on a Warm model"). */
export async function startingModel(models) {
  const statuses = await Promise.all(models.map((m) => modelStatus(m.id).catch(() => null)));
  const warm = models.find((m, i) => statuses[i] && statuses[i].warm);
  return (warm || models.find((m) => m.default) || models[0] || {}).id || "";
}

function minutes(seconds) {
  const whole = Math.max(1, Math.round(seconds / 60));
  return `${whole} minute${whole === 1 ? "" : "s"}`;
}

/** The one line above the output while a model starts: how far the start has got and about how
 * long is left; null when the model serves. */
export function startLine(model, status) {
  if (!status || status.warm || !status.boot) return null;
  const boot = status.boot;
  const eight = Boolean(model && /^8x/.test(model.gpu_shape || ""));
  const total = eight ? START_S.eight : START_S.one;
  const age = Number(boot.stage_age_s) || 0;
  const name = model ? shortName(model) : status.id;
  const left = Math.max(60, total - age);
  return `${name} is starting: ${boot.stage_label}, ${minutes(age)} so far. About ${minutes(left)} left.`;
}
