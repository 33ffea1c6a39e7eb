// One Run as the output shows it: its number, model, status, how its settings differ from the
// others', how many first tokens match the first Run's, its text as it grows (tokens, Heatmap),
// the likeliest tokens at a token, its Activations, Copy, and, beside other Runs, its own Stop
// (alone, the page's one Stop stops it). Its article is named "Run 4", so its buttons are simply
// "Copy" and "Stop".
import { useState } from "preact/hooks";
import { html } from "../html.js";
import { Menu } from "../components/menu.js";
import { number } from "../components/format.js";
import { Link } from "../components/link.js";
import { ModelName } from "./models.js";
import { Alternatives, Marked, TokenText, tokensOf } from "./tokens.js";
import { GROWING } from "./runs.js";
import { Activations } from "./activations.js";

export const STATUS = { queued: "Waiting", running: "Running", completed: "Completed", failed: "Failed", stopped: "Stopped" };

export function promptText(request) {
  const prompt = request && request.prompt;
  return typeof prompt === "string" ? prompt : JSON.stringify(prompt);
}

/** The text of a Run: each choice under its number when it has several. */
export function outputText(run) {
  const choices = run.choices || [];
  if (choices.length <= 1) return choices[0] ? choices[0].text : "";
  return choices.map((choice) => `Choice ${choice.index + 1}\n${choice.text}`).join("\n\n");
}

/** How many first tokens of two Runs' first choices match. */
export function matching(a, b) {
  const first = tokensOf(a.choices && a.choices[0]);
  const second = tokensOf(b.choices && b.choices[0]);
  if (!first || !second) return null;
  let count = 0;
  while (count < first.length && count < second.length && first[count].token === second[count].token) count += 1;
  return count;
}

function Budget({ error }) {
  // In the Playground, the note on budget_exceeded links to Request more tokens, without the address.
  const message = error.message.replace(/\s*Ask for more tokens at \S+\.?$/, "");
  return html`<p class="form-error run-error" role="alert">${message} <${Link} to="/usage/request">Request more tokens</${Link}></p>`;
}

export function ErrorNote({ error }) {
  if (error.code === "budget_exceeded") return html`<${Budget} error=${error} />`;
  return html`<p class="form-error run-error" role="alert">${error.message}</p>`;
}

function Usage({ run }) {
  const usage = run.usage;
  if (!usage) return null;
  return html`<p class="run-usage">${number(usage.prompt_tokens)} input tokens · ${number(usage.completion_tokens)} output tokens</p>`;
}

/** What a Run's prompt adds to the prompt on screen (a Run that runs on from a token): shown in
 * gray before its text. */
function leadOf(run, prompt) {
  const own = run.request && run.request.prompt;
  if (typeof own !== "string" || !prompt || own === prompt || !own.startsWith(prompt)) return "";
  return own.slice(prompt.length);
}

/** Whether a Run asked for log probabilities (spec: "Top logprobs shown above 0"): then each token
 * of its text is a button. */
export function asksLogprobs(run) {
  return Number(run.request && run.request.logprobs) > 0;
}

// While a Run grows its text comes ahead of its log probabilities (domain/playground/stream.py):
// its tokens become buttons, with the heatmap, once it has ended.
export function RunView({ run, model, differs, match, changes, heatmap, startLine, onStop, onCopy, onRunOn, busy, prompt }) {
  const [selected, setSelected] = useState(null); // {choice, index}
  const growing = GROWING.has(run.status);
  const choices = run.choices || [];
  const title = `Run ${run.number}`;
  const copyItems = [
    { label: "The text", onSelect: () => onCopy(outputText(run), "the text") },
    // With echo the text holds its prompt already.
    { label: "The prompt and the text", onSelect: () => onCopy((run.request.echo ? "" : promptText(run.request)) + outputText(run), "the prompt and the text") },
  ];
  const tokens = selected ? tokensOf(choices[selected.choice]) : null;
  return html`<article class=${`run run-${run.status}`} aria-labelledby=${`run-${run.id}-title`}>
    <header class="run-head">
      <h3 id=${`run-${run.id}-title`}>${title}</h3>
      <${ModelName} model=${model} id=${run.model} />
      <span class=${`badge badge-run-${run.status}`}>${STATUS[run.status] || run.status}</span>
      <div class="run-actions">
        ${growing && onStop ? html`<button type="button" aria-label=${`Stop run ${run.number}`} onClick=${() => onStop(run)}>Stop</button>` : null}
        <${Menu} label="Copy" items=${copyItems} />
      </div>
    </header>
    ${differs && differs.length ? html`<p class="run-differs">${differs.map(([label, words]) => html`<span class="chip">${label} ${words}</span>`)}</p>` : null}
    ${match !== null && match !== undefined ? html`<p class="run-match">${match.count} first token${match.count === 1 ? "" : "s"} match Run ${match.of}'s.</p>` : null}
    ${changes && changes.length ? html`<details class="run-changes"><summary>The settings on screen differ from this Run's</summary>
      <ul>${changes.map(([label, its, now]) => html`<li>${label}: ${its} in this Run, ${now} on screen</li>`)}</ul></details>` : null}
    ${growing && startLine ? html`<p class="start-line" role="status">${startLine}</p>` : null}
    ${run.status === "queued" && !startLine ? html`<p class="muted" role="status">Waiting to start…</p>` : null}
    ${leadOf(run, prompt) ? html`<p class="run-lead-note">Runs on from the prompt and <span class="run-lead mono"><${Marked} text=${leadOf(run, prompt)} /></span></p>` : null}
    ${choices.map((choice, c) => html`<div class="choice" key=${c}>
      ${choices.length > 1 ? html`<h4 class="choice-title">Choice ${choice.index + 1}</h4>` : null}
      <${TokenText} choice=${growing || !asksLogprobs(run) ? { text: choice.text } : choice} heatmap=${heatmap} label=${`The text of ${title}${choices.length > 1 ? `, choice ${choice.index + 1}` : ""}`}
        selected=${selected && selected.choice === c ? selected.index : null}
        onSelect=${(index) => setSelected(index === null ? null : { choice: c, index })} />
    </div>`)}
    ${growing && !choices.some((choice) => choice.text) ? html`<p class="run-cursor muted" aria-hidden="true">▍</p>` : null}
    ${tokens && selected ? html`<${Alternatives} tokens=${tokens} index=${selected.index} busy=${busy}
      onClose=${() => setSelected(null)} onChoose=${(index, token) => onRunOn(run, selected.choice, index, token)} />` : null}
    ${run.error ? html`<${ErrorNote} error=${run.error} />` : null}
    <${Usage} run=${run} />
    ${run.activations ? html`<${Activations} run=${run} model=${model} />` : null}
  </article>`;
}

/** A model whose Run the API refused: why, beside the Runs that started. */
export function RefusedView({ refusal, model, index, single }) {
  return html`<article class="run run-refused" aria-labelledby=${`refused-${index}`}>
    <header class="run-head">
      <h3 id=${`refused-${index}`}>${single ? "Not started" : `Model ${index + 1}: not started`}</h3>
      <${ModelName} model=${model} id=${refusal.model} />
    </header>
    <${ErrorNote} error=${refusal.error} />
    <p class="muted">Nothing ran for this model.</p>
  </article>`;
}
