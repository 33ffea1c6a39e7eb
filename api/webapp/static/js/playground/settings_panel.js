// The settings of one model: the Model, each field of the request with its range marked as you
// type, Read Layers, Steer, the Heatmap, and Reset to default (spec: "Run a prompt"). Every field
// shows at once, none folded away: the guide names them (Top p, Seed) as if they are in view.
import { html } from "../html.js";
import { Checkbox, Field } from "../components/field.js";
import { FIELDS, layersWords, rangeWords } from "./fields.js";
import { shortName } from "./models.js";
import { SteerFields } from "./steer.js";

const MORE = FIELDS.filter((field) => !field.basic && field.key !== "output_residual_stream");

function hintOf(field, limits) {
  if (field.kind === "int" || field.kind === "number") {
    const range = rangeWords(field, limits);
    const words = range ? `${range[0].toUpperCase()}${range.slice(1)}.` : "";
    return [words, field.hint].filter(Boolean).join(" ");
  }
  if (field.kind === "layers") return [field.hint, layersWords(limits)].filter(Boolean).join(" ");
  return field.hint;
}

/** One setting with its label, its range as a hint, and its error; the Loom page's settings too. */
export function Setting({ field, settings, onChange, error, limits }) {
  const value = settings[field.key];
  const set = (next) => onChange({ ...settings, [field.key]: next });
  if (field.kind === "bool") {
    const check = html`<${Checkbox} label=${field.label} checked=${value} onChange=${set} error=${error}
      aria-describedby=${field.hint ? `setting-${field.key}-hint` : undefined} />`;
    return field.hint ? html`<div class="check-with-hint">${check}<p class="hint" id=${`setting-${field.key}-hint`}>${field.hint}</p></div>` : check;
  }
  const numeric = field.kind === "int" || field.kind === "number";
  const extra = numeric ? { inputmode: field.kind === "int" && !(field.min < 0) ? "numeric" : "decimal", autocomplete: "off" } : { autocomplete: "off" };
  return html`<${Field} label=${field.label} value=${value} onInput=${set} error=${error} hint=${hintOf(field, limits)}
    multiline=${field.kind === "stops"} spellcheck=${field.kind === "text" ? undefined : "false"} ...${extra} />`;
}

export function SettingsPanel({ title, settings, onChange, errors, models, limits, heatmap, onHeatmap, onReset, onClose }) {
  const field = (key) => FIELDS.find((f) => f.key === key);
  const show = (f) => html`<${Setting} key=${f.key} field=${f} settings=${settings} onChange=${onChange} error=${errors[f.key]} limits=${limits} />`;
  const chosen = models.find((m) => m.id === settings.model);
  return html`<section class="settings" aria-labelledby="settings-title">
    <div class="settings-head">
      <h2 id="settings-title">${title}</h2>
      ${onClose ? html`<button type="button" class="link-button" onClick=${onClose}>Hide the settings</button>` : null}
    </div>
    <div class=${`field${errors.model ? " field-invalid" : ""}`}>
      <label for="setting-model">Model</label>
      <select id="setting-model" value=${settings.model} title=${settings.model}
        aria-invalid=${errors.model ? "true" : undefined} aria-describedby=${errors.model ? "setting-model-error" : undefined}
        onChange=${(event) => onChange({ ...settings, model: event.currentTarget.value })}>
        ${chosen || !settings.model ? null : html`<option value=${settings.model}>${settings.model}</option>`}
        ${models.map((m) => html`<option value=${m.id} title=${m.id}>${shortName(m)}${m.default ? " (default)" : ""}</option>`)}
      </select>
      <p class="hint">The model's id: <code>${settings.model || "—"}</code></p>
      ${errors.model ? html`<p class="field-error" id="setting-model-error">${errors.model}</p>` : null}
    </div>
    ${FIELDS.filter((f) => f.basic).map(show)}
    <${Checkbox} label="Heatmap" checked=${heatmap} onChange=${onHeatmap} />
    ${show(field("output_residual_stream"))}
    <${SteerFields} steer=${settings.steer} onChange=${(steer) => onChange({ ...settings, steer })}
      error=${errors.apply_steering_vectors} hiddenSize=${limits.hidden_size} />
    <h3 class="settings-more">More settings</h3>
    ${MORE.map(show)}
    <div class="actions"><button type="button" onClick=${onReset}>Reset to default</button></div>
  </section>`;
}
