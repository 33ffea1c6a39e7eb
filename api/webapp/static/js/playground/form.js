// The Playground's form beside its settings: the prompt (Tab in an empty box puts in the gray
// example) and, in Compare, the list of models with Change, Duplicate and Remove.
import { html } from "../html.js";
import { MOST_MODELS } from "./address.js";
import { BY_KEY, defaults } from "./fields.js";
import { ModelName } from "./models.js";

export const EXAMPLE = "The three most surprising facts about octopuses are";

export function PromptBox({ value, onInput, error }) {
  function onKey(event) {
    // Tab in an empty box puts in the gray example; the next Tab moves on.
    if (event.key === "Tab" && !event.shiftKey && !event.currentTarget.value) {
      event.preventDefault();
      onInput(EXAMPLE);
    }
  }
  return html`<div class=${`field prompt-field${error ? " field-invalid" : ""}`}>
    <label for="prompt">Prompt</label>
    <textarea id="prompt" rows="6" value=${value} placeholder=${EXAMPLE} spellcheck="false"
      aria-describedby=${`prompt-hint${error ? " prompt-error" : ""}`} aria-invalid=${error ? "true" : undefined}
      onInput=${(event) => onInput(event.currentTarget.value)} onKeyDown=${onKey}></textarea>
    <p class="hint" id="prompt-hint">In an empty box, Tab puts in the gray example.</p>
    ${error ? html`<p class="field-error" id="prompt-error">${error}</p>` : null}
  </div>`;
}

function settingsSummary(settings) {
  const fresh = defaults(settings.model);
  const changed = Object.keys(BY_KEY).filter((key) => settings[key] !== fresh[key])
    .map((key) => `${BY_KEY[key].label} ${settings[key] === true ? "on" : settings[key] === false ? "off" : settings[key] || "none"}`);
  if (settings.steer && settings.steer.rows) changed.push("Steer");
  return changed.join(" · ");
}

export function ModelsList({ models, list, active, errors, onChange, onDuplicate, onRemove, onAdd }) {
  return html`<section class="models" aria-labelledby="models-title">
    <h2 id="models-title">Models</h2>
    <ol class="model-list">
      ${list.map((settings, i) => {
        const model = (models || []).find((m) => m.id === settings.model);
        const bad = Object.keys(errors[i] || {}).length > 0;
        return html`<li class=${`model-card${i === active ? " model-active" : ""}${bad ? " model-invalid" : ""}`}>
          <div class="model-card-head">
            <span class="model-number">Model ${i + 1}</span>
            <${ModelName} model=${model} id=${settings.model} />
            ${i === active ? html`<span class="muted">(in the settings)</span>` : null}
          </div>
          <p class="model-summary">${settingsSummary(settings) || "The default settings"}</p>
          ${bad ? html`<p class="field-error">${Object.values(errors[i])[0]}</p>` : null}
          <div class="model-buttons">
            <button type="button" aria-pressed=${i === active ? "true" : "false"} aria-label=${`Change the settings of model ${i + 1}`}
              onClick=${() => onChange(i)}>Change</button>
            <button type="button" disabled=${list.length >= MOST_MODELS} aria-label=${`Duplicate model ${i + 1}`}
              onClick=${() => onDuplicate(i)}>Duplicate</button>
            <button type="button" disabled=${list.length <= 1} aria-label=${`Remove model ${i + 1}`}
              onClick=${() => onRemove(i)}>Remove</button>
          </div>
        </li>`;
      })}
    </ol>
    <button type="button" disabled=${list.length >= MOST_MODELS} onClick=${onAdd}>Add model</button>
    ${list.length >= MOST_MODELS ? html`<span class="muted"> At most ${MOST_MODELS} models.</span>` : null}
  </section>`;
}
