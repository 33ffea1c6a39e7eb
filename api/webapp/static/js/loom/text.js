// Text (spec: "Branch under a Node"): the text of the path to the Node that you read, the earlier
// Nodes in gray, then the Node with its heatmap; a token selected shows the likeliest tokens at
// that place; a failed Node says why under the text that it had. The path scrolls when long, so it
// takes the focus (its text can be read and scrolled by keyboard). The likeliest tokens are the
// Loom's own box, not the Playground's: its heading comes under Text's h2, so it is an h3 (the
// Playground's is an h4 under a Run's h3), as axe-core's heading-order asks.
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { ErrorNote } from "../playground/output.js";
import { Legend, Marked, TokenText, percent, tokensOf } from "../playground/tokens.js";
import { GROWING } from "./api.js";
import { STATUS_WORDS } from "./tree.js";

/** The likeliest tokens at each token of a Node, in the shape of a choice that tokens.js reads. */
function choiceOf(node) {
  return { text: node.text, logprobs: GROWING.has(node.status) ? null : node.logprobs };
}

/** The likeliest tokens at the token `index` of the Node, the token itself marked, and Close. */
function Likeliest({ tokens, index, onClose }) {
  const at = tokens[index];
  if (!at) return null;
  const top = Object.entries(at.top || {}).sort((a, b) => b[1] - a[1]);
  if (!top.some(([token]) => token === at.token) && at.logprob !== null) top.push([at.token, at.logprob]);
  const title = `The likeliest tokens at token ${index + 1}`;
  return html`<section class="alternatives loom-alternatives" aria-label=${title}>
    <div class="alternatives-head">
      <h3>${title}</h3>
      <button type="button" class="link-button" onClick=${onClose}>Close</button>
    </div>
    <ul>
      ${top.map(([token, logprob]) => html`<li>
        <span class=${`alt${token === at.token ? " alt-chosen" : ""}`}>
          <span class="alt-token mono"><${Marked} text=${token} /></span><span class="alt-p">${percent(logprob)}</span>
        </span>
      </li>`)}
    </ul>
  </section>`;
}

export function PathText({ nodes, node }) {
  const [selected, setSelected] = useState(null);
  useEffect(() => setSelected(null), [node && node.id]);
  if (!node) return null;
  const earlier = nodes.path(node.id).slice(0, -1).map((n) => n.text).join("");
  const choice = choiceOf(node);
  const tokens = tokensOf(choice);
  const status = STATUS_WORDS[node.status];
  return html`<section class="loom-text" aria-labelledby="loom-text-title">
    <div class="loom-text-head">
      <h2 id="loom-text-title">Text</h2>
      ${status ? html`<span class=${`badge badge-run-${node.status === "cancelled" ? "stopped" : node.status}`}>${status}</span>` : null}
      ${tokens ? html`<${Legend} />` : null}
    </div>
    <div class="run-text loom-path" tabindex="0">
      ${earlier ? html`<span class="path-earlier">${earlier}</span>` : null}
      ${tokens ? html`<${TokenText} choice=${choice} heatmap=${true} label="The text of the Node"
          selected=${selected} onSelect=${setSelected} />`
        : html`<span class="path-node">${node.text}</span>`}
      ${GROWING.has(node.status) ? html`<span class="run-cursor muted" aria-hidden="true">▍</span>` : null}
    </div>
    ${tokens && selected !== null ? html`<${Likeliest} tokens=${tokens} index=${selected} onClose=${() => setSelected(null)} />` : null}
    ${node.status === "failed" && node.error ? html`<${ErrorNote} error=${node.error} />` : null}
  </section>`;
}
