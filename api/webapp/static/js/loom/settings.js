// The settings of a Branch (spec: "Branch under a Node"; "Grow a Loom with the API": a Branch
// takes the fields of POST /v1/completions that sample, with max_tokens 1 to 1,000 and n, the
// Branches, 1 to 8). The fields, their ranges and messages are the Playground's (fields.js); a Loom
// opens with the settings of its last Branch, Seed blank, and Top logprobs shown at 5 when that
// Branch asked for none, for the heatmap.
import { html } from "../html.js";
import { FIELDS, parse } from "../playground/fields.js";
import { shortName } from "../playground/models.js";
import { Setting } from "../playground/settings_panel.js";

const LOOM = {
  max_tokens: { initial: "16", max: 1000 },
  n: { label: "Branches", max: 8, hint: "How many Nodes the Branch grows." },
};
const BRANCH_KEYS = ["n", "max_tokens", "temperature", "top_p", "logprobs", "seed",
  "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty", "stop"];
export const LOOM_FIELDS = BRANCH_KEYS.map((key) => ({ ...FIELDS.find((f) => f.key === key), ...(LOOM[key] || {}) }));
const BASIC = new Set(["max_tokens", "temperature", "top_p", "n", "logprobs", "seed"]);

export function loomDefaults(model = "") {
  const settings = { model };
  for (const field of LOOM_FIELDS) settings[field.key] = field.initial;
  return settings;
}

/** The form of a Loom that opens: its last Branch's settings (the export's last_generation_config,
 * with `model` as it was asked for), Seed blank, Top logprobs shown 5 when it asked for none. */
export function openingSettings(last, fallbackModel) {
  const settings = loomDefaults(fallbackModel);
  if (!last) return settings;
  if (last.model) settings.model = last.model;
  for (const field of LOOM_FIELDS) {
    const value = last[field.key];
    if (value === undefined || value === null) continue;
    // One text a line, with a line break as \n and a tab as \t, as the Stop box reads them (fields.js).
    if (field.kind === "stops") {
      settings[field.key] = (Array.isArray(value) ? value : [value])
        .map((stop) => stop.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\t/g, "\\t")).join("\n");
    }
    else settings[field.key] = String(value);
  }
  settings.seed = "";
  if (!Number(last.logprobs)) settings.logprobs = "5";
  return settings;
}

export function errorsOfBranch(settings, limits) {
  const errors = {};
  for (const field of LOOM_FIELDS) {
    const { error } = parse(field, settings[field.key], limits);
    if (error) errors[field.key] = error;
  }
  return errors;
}

/** The body of a Branch: the model and each field that the form sets apart from the API's default. */
export function branchBody(settings, limits) {
  const body = { model: settings.model };
  for (const field of LOOM_FIELDS) {
    const { value } = parse(field, settings[field.key], limits);
    if (value !== undefined) body[field.key] = value;
  }
  return body;
}

export function BranchSettings({ settings, errors, models, limits, onChange }) {
  const show = (field) => html`<${Setting} key=${field.key} field=${field} settings=${settings} onChange=${onChange}
    error=${errors[field.key]} limits=${limits} />`;
  const chosen = models.find((m) => m.id === settings.model);
  return html`<section class="settings loom-settings" aria-labelledby="loom-settings-title">
    <h2 id="loom-settings-title" class="loom-settings-title">Settings</h2>
    <div class=${`field${errors.model ? " field-invalid" : ""}`}>
      <label for="loom-model">Model</label>
      <select id="loom-model" value=${settings.model} title=${settings.model}
        onChange=${(event) => onChange({ ...settings, model: event.currentTarget.value })}>
        ${chosen || !settings.model ? null : html`<option value=${settings.model}>${settings.model}</option>`}
        ${models.map((m) => html`<option value=${m.id} title=${m.id}>${shortName(m)}${m.default ? " (default)" : ""}</option>`)}
      </select>
      ${errors.model ? html`<p class="field-error">${errors.model}</p>` : null}
    </div>
    <div class="loom-settings-basic">${LOOM_FIELDS.filter((f) => BASIC.has(f.key)).map(show)}</div>
    <h3 class="settings-more">More settings</h3>
    <div class="loom-settings-more">${LOOM_FIELDS.filter((f) => !BASIC.has(f.key)).map(show)}</div>
  </section>`;
}
