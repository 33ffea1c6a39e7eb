// A choice's text, token by token (spec: "Read tokens and the heatmap"): with log probabilities
// each token is a button (one tab stop; the arrow keys move, Enter or a select shows the likeliest
// tokens there), and the Heatmap colours it by its probability in five bands and marks a line
// break with ⏎ and a tab with ⇥. A mark is text on the page, so that it reads as the spec draws
// it, and a copy of the page's text leaves it out (leaveMarksOut). A token is a span with the
// button role, not a <button>: a <button> is a box of its own, so a line break inside one would
// not break the line of the text.
import { useRef } from "preact/hooks";
import { html } from "../html.js";

export const BANDS = [
  [0.9, "90% or more"], [0.5, "50% to 90%"], [0.1, "10% to 50%"], [0.01, "1% to 10%"], [0, "Under 1%"],
];

export function band(logprob) {
  const p = Math.exp(logprob);
  return BANDS.findIndex(([floor]) => p >= floor);
}

/** 45.2%, 3.14%, 0.0079%: two significant digits at least, however unlikely the token. */
export function percent(logprob) {
  const p = Math.exp(logprob) * 100;
  if (p >= 99.95) return "100%";
  if (p >= 10) return `${p.toFixed(1)}%`;
  if (p >= 1) return `${p.toFixed(2)}%`;
  if (p >= 1e-6) return `${Number(p.toPrecision(2))}%`;
  return "under 0.000001%";
}

const MARKS = { "\n": ["mark-newline", "⏎"], "\t": ["mark-tab", "⇥"] };

/** A token's text with its marks: a ⏎ before each line break, a ⇥ before each tab. */
export function Marked({ text }) {
  const parts = [];
  let plain = "";
  for (const char of text) {
    if (MARKS[char]) {
      if (plain) parts.push(plain);
      plain = "";
      const [kind, mark] = MARKS[char];
      parts.push(html`<span class=${`mark ${kind}`} aria-hidden="true">${mark}</span>${char}`);
    } else plain += char;
  }
  if (plain) parts.push(plain);
  return parts;
}

/** A copy of the page's text without the marks: the 'copy' event of a selection that holds one
 * puts the selection's own text, less the marks, on the clipboard. */
export function leaveMarksOut(event) {
  const selection = window.getSelection();
  if (!selection || selection.isCollapsed || !event.clipboardData) return;
  const holder = document.createElement("div");
  for (let i = 0; i < selection.rangeCount; i += 1) holder.append(selection.getRangeAt(i).cloneContents());
  const marks = holder.querySelectorAll(".mark");
  if (!marks.length) return;
  marks.forEach((mark) => mark.remove());
  event.clipboardData.setData("text/plain", holder.textContent);
  event.preventDefault();
}

/** The tokens of a choice with their log probabilities, or null when it has none. */
export function tokensOf(choice) {
  const logprobs = choice && choice.logprobs;
  if (!logprobs || !Array.isArray(logprobs.tokens) || !logprobs.tokens.length) return null;
  return logprobs.tokens.map((token, i) => ({
    token, logprob: logprobs.token_logprobs ? logprobs.token_logprobs[i] : null,
    top: logprobs.top_logprobs ? logprobs.top_logprobs[i] : null,
  }));
}

export function Legend() {
  // Named apart from the Heatmap switch of the settings, so that "Heatmap" labels one thing.
  return html`<ul class="heat-legend" aria-label="Bands of probability">
    ${BANDS.map(([, label], i) => html`<li><span class=${`heat heat-${i} swatch-heat`} aria-hidden="true"></span>${label}</li>`)}
  </ul>`;
}

/** The text of a choice. `selected` is the index of the token whose likeliest tokens show. */
export function TokenText({ choice, heatmap, selected, onSelect, label }) {
  const list = useRef(null);
  const tokens = tokensOf(choice);
  if (!tokens) return html`<div class="run-text">${choice.text || ""}</div>`;
  const focusAt = (index) => {
    const buttons = list.current ? list.current.querySelectorAll(".tok") : [];
    const clamped = Math.max(0, Math.min(buttons.length - 1, index));
    if (buttons[clamped]) buttons[clamped].focus();
  };
  function onKey(event, index) {
    const moves = { ArrowRight: index + 1, ArrowLeft: index - 1, ArrowDown: index + 1, ArrowUp: index - 1, Home: 0, End: tokens.length - 1 };
    if (event.key in moves) {
      event.preventDefault();
      focusAt(moves[event.key]);
    } else if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      onSelect(selected === index ? null : index);
    }
  }
  // One tab stop: the selected token, else the first.
  const stop = selected !== null && selected !== undefined && selected < tokens.length ? selected : 0;
  return html`<div class="run-text run-tokens" ref=${list} role="group" aria-label=${label}>
    ${tokens.map((t, i) => {
      const heat = heatmap && t.logprob !== null && t.logprob !== undefined ? ` heat heat-${band(t.logprob)}` : "";
      const share = t.logprob === null || t.logprob === undefined ? null : percent(t.logprob);
      // The name is the token's own text, then its share as hidden text: an aria-label would have to
      // hold the visible text word for word, and axe-core splits some scripts (katakana) into
      // words differently with and without the share after them (label-content-name-mismatch).
      // The share is a mark, so that a copy of the page's text leaves it out.
      return html`<span role="button" class=${`tok${heat}`} tabindex=${i === stop ? "0" : "-1"}
        aria-pressed=${selected === i ? "true" : "false"} title=${share || undefined}
        onClick=${() => onSelect(selected === i ? null : i)} onKeyDown=${(event) => onKey(event, i)}>${heatmap ? html`<${Marked} text=${t.token} />` : t.token}${share ? html`<span class="mark visually-hidden">, ${share}</span>` : null}</span>`;
    })}
  </div>`;
}

/** The likeliest tokens at one place. With onChoose (the Playground) each is a button that runs on
 * from it in a new Run; without (the Loom page) the list only reads. */
export function Alternatives({ tokens, index, onChoose, onClose, busy }) {
  const at = tokens[index];
  if (!at) return null;
  const top = Object.entries(at.top || {}).sort((a, b) => b[1] - a[1]);
  if (!top.some(([token]) => token === at.token) && at.logprob !== null) top.push([at.token, at.logprob]);
  return html`<section class="alternatives" aria-label=${`The likeliest tokens at token ${index + 1}`}>
    <div class="alternatives-head">
      <h4>The likeliest tokens at token ${index + 1}</h4>
      <button type="button" class="link-button" onClick=${onClose}>Close</button>
    </div>
    ${onChoose ? html`<p class="hint">Select another token to cut the text there, put it in, and run on from it in a new Run.</p>` : null}
    <ul>
      ${top.map(([token, logprob]) => html`<li>${onChoose ? html`
        <button type="button" class=${`alt${token === at.token ? " alt-chosen" : ""}`} disabled=${busy || token === at.token}
          onClick=${() => onChoose(index, token)}>
          <span class="alt-token mono"><${Marked} text=${token} /></span><span class="alt-p">${percent(logprob)}</span>
        </button>` : html`
        <span class=${`alt${token === at.token ? " alt-chosen" : ""}`}>
          <span class="alt-token mono"><${Marked} text=${token} /></span><span class="alt-p">${percent(logprob)}</span>
        </span>`}
      </li>`)}
    </ul>
  </section>`;
}
