// A Run's Activations (spec: "Read Activations"): each Layer's norm per token as a small chart,
// and a download of the Activations in the API's encoding (zstd in base64, "Decode the tensor").
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { url } from "../api.js";
import { readActivations } from "./runs.js";

// Browsers' Compression Streams have no zstd: fzstd decodes it, loaded when a chart is opened.
async function unzstd(bytes) {
  const { decompress } = await import("../../vendor/fzstd.js");
  return decompress(bytes);
}

/** float32 numbers of the tensor, bfloat16 bits shifted as the spec's decode() does. */
async function decode(tensor) {
  const packed = Uint8Array.from(atob(tensor.data), (c) => c.charCodeAt(0));
  const raw = await unzstd(packed);
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  if (tensor.original_dtype === "torch.bfloat16" || tensor.dtype === "int16") {
    const out = new Float32Array(raw.byteLength / 2);
    const word = new DataView(new ArrayBuffer(4));
    for (let i = 0; i < out.length; i += 1) {
      word.setUint32(0, view.getUint16(i * 2, true) << 16, true);
      out[i] = word.getFloat32(0, true);
    }
    return out;
  }
  if (tensor.dtype === "float32") return new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
  if (tensor.dtype === "float16") {
    const out = new Float32Array(raw.byteLength / 2);
    for (let i = 0; i < out.length; i += 1) out[i] = view.getFloat16 ? view.getFloat16(i * 2, true) : NaN;
    return out;
  }
  throw new Error(`The Activations are ${tensor.dtype}, which the App does not chart.`);
}

/** [layer][token] norms of a [layers, tokens, hidden] tensor. */
export async function layerNorms(tensor) {
  const numbers = await decode(tensor);
  const [layers, tokens, hidden] = tensor.shape;
  return Array.from({ length: layers }, (_, l) => Array.from({ length: tokens }, (_, t) => {
    let sum = 0;
    const base = (l * tokens + t) * hidden;
    for (let i = 0; i < hidden; i += 1) sum += numbers[base + i] * numbers[base + i];
    return Math.sqrt(sum);
  }));
}

const COLOURS = ["#1f4fb5", "#a14e00", "#1d7a46", "#8e2a8e", "#b3261e", "#00707a", "#5f6674", "#6b4f00"];

function Chart({ norms, layers }) {
  const width = 480;
  const height = 140;
  const pad = 28;
  const tokens = norms[0] ? norms[0].length : 0;
  const top = Math.max(1e-9, ...norms.flat());
  const x = (t) => pad + (tokens <= 1 ? 0 : (t * (width - pad - 8)) / (tokens - 1));
  const y = (v) => height - pad + 8 - (v / top) * (height - pad - 8);
  return html`<figure class="activation-chart">
    <svg viewBox=${`0 0 ${width} ${height}`} role="img" aria-label=${`The norm of each Layer at each of ${tokens} tokens`}>
      <line class="grid" x1=${pad} y1=${height - pad + 8} x2=${width - 8} y2=${height - pad + 8} />
      <text class="axis" x="2" y="12">${top.toFixed(1)}</text>
      <text class="axis" x=${pad} y=${height - 4}>token 0</text>
      <text class="axis" x=${width - 60} y=${height - 4}>token ${tokens - 1}</text>
      ${norms.map((row, l) => html`<polyline fill="none" stroke=${COLOURS[l % COLOURS.length]} stroke-width="1.5"
        points=${row.map((v, t) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ")} />`)}
    </svg>
    <figcaption>${layers.map((layer, l) => html`<span class="legend"><span class="swatch" data-layer=${l % COLOURS.length}></span>Layer ${layer}</span>`)}</figcaption>
  </figure>`;
}

export function Activations({ run }) {
  const [state, setState] = useState({ norms: null, error: null, shape: null });
  const [open, setOpen] = useState(false);
  const layers = run.request.output_residual_stream === true
    ? null : Array.isArray(run.request.output_residual_stream) ? run.request.output_residual_stream : null;
  useEffect(() => {
    if (!open || state.norms || state.error) return;
    readActivations(run.id).then(async (doc) => {
      if (!doc) return setState({ norms: null, error: "The Activations are no longer kept.", shape: null });
      const tensor = doc.residual_stream;
      try {
        setState({ norms: await layerNorms(tensor), error: null, shape: tensor.shape });
      } catch (failure) {
        setState({ norms: null, error: `This browser cannot chart the Activations (${failure.message}). Download them instead.`, shape: tensor.shape });
      }
    }).catch((failure) => setState({ norms: null, error: failure.message, shape: null }));
  }, [open, run.id]);
  const shown = state.shape ? (layers || Array.from({ length: state.shape[0] }, (_, i) => i)) : [];
  return html`<details class="activations" onToggle=${(event) => setOpen(event.currentTarget.open)}>
    <summary>Activations${layers ? ` of Layers ${layers.join(", ")}` : ""}</summary>
    <p class="hint">Kept until ${new Date(run.activations.expires_at).toISOString().slice(0, 16).replace("T", " ")} UTC.${" "}
      <a href=${url(`account/runs/${run.id}/activations`)} download=${`run-${run.number}-activations.json`}>Download the Activations</a></p>
    ${state.norms ? html`<p class="hint">Each Layer's norm at each token: ${state.shape.join(" × ")} numbers.</p><${Chart} norms=${state.norms} layers=${shown} />` : null}
    ${state.error ? html`<p class="muted">${state.error}</p>` : null}
    ${open && !state.norms && !state.error ? html`<p class="muted" role="status">Reading the Activations…</p>` : null}
  </details>`;
}
