// A number per day as stacked SVG bars: Usage's tokens per day (input under output) by default,
// or any `series` (Spend's GPU spend per day, a model each). Point at a day, or focus the chart
// and use the arrow keys, Home and End, to read its numbers; View as table lists them.
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { compact, day, number, shortDay } from "./components/format.js";

const PAD = { top: 10, right: 8, bottom: 24, left: 48 };

function niceMax(value) {
  if (value <= 0) return 10;
  const step = 10 ** Math.floor(Math.log10(value));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * step >= value) return m * step;
  return 10 * step;
}

function describeTokens(point) {
  return `${day(point.day)}: ${number(point.input)} input and ${number(point.output)} output tokens`;
}

// Each series: the day's field `key`, its `label`, and its colour as a class (app.css) or a `color`.
const TOKENS = [{ key: "input", label: "Input", class: "bar-input" }, { key: "output", label: "Output", class: "bar-output" }];
let charts = 0;

function Swatch({ entry }) {
  return entry.color
    ? html`<svg class="swatch-svg" width="13" height="13" aria-hidden="true"><rect width="13" height="13" rx="2" fill=${entry.color} /></svg>`
    : html`<span class=${`swatch swatch-${entry.key}`}></span>`;
}

export function DayChart({ days, label = "Tokens per day", series = TOKENS, value = number, axis = compact,
  describe = describeTokens, empty = "No Completions on these days." }) {
  const [at, setAt] = useState(null);
  const [asTable, setAsTable] = useState(false);
  const svg = useRef(null);
  const frame = useRef(null);
  const readout = useRef(`chart-readout-${++charts}`).current;
  const total = (d) => series.reduce((sum, entry) => sum + (d[entry.key] || 0), 0);
  const [WIDTH, setWidth] = useState(720);
  const HEIGHT = WIDTH < 500 ? 180 : 220;
  useEffect(() => {
    // Drawn in the frame's own pixels, so the axis text keeps its size on a phone.
    const observer = new ResizeObserver(([entry]) => setWidth(Math.max(200, Math.floor(entry.contentRect.width))));
    observer.observe(frame.current);
    return () => observer.disconnect();
  }, []);
  const max = niceMax(Math.max(0, ...days.map(total)));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const slot = plotW / Math.max(1, days.length);
  const barW = Math.max(1, Math.min(28, slot * 0.7));
  const y = (v) => PAD.top + plotH - (v / max) * plotH;
  const labelEvery = Math.ceil(days.length / Math.max(2, Math.floor(WIDTH / 90)));

  function onKey(event) {
    if (!days.length) return;
    const last = days.length - 1;
    const moves = { ArrowRight: (at ?? -1) + 1, ArrowLeft: (at ?? days.length) - 1, Home: 0, End: last };
    if (!(event.key in moves)) return;
    event.preventDefault();
    setAt(Math.min(last, Math.max(0, moves[event.key])));
  }
  function onPointer(event) {
    const box = svg.current.getBoundingClientRect();
    const x = ((event.clientX - box.left) / box.width) * WIDTH - PAD.left;
    const index = Math.floor(x / slot);
    if (index >= 0 && index < days.length) setAt(index);
  }
  const point = at !== null && days[at] ? days[at] : null;
  const counted = days.filter((d) => total(d) > 0);
  return html`<div class="chart">
    <div class="chart-frame" ref=${frame} tabindex="0" role="group" aria-label=${`${label}. Use the left and right arrow keys to read each day.`}
      aria-describedby=${readout} onKeyDown=${onKey}>
      <svg ref=${svg} width=${WIDTH} height=${HEIGHT} viewBox=${`0 0 ${WIDTH} ${HEIGHT}`} aria-hidden="true"
        onPointerMove=${onPointer} onPointerDown=${onPointer}>
        ${[0, 0.5, 1].map((f) => html`<g>
          <line x1=${PAD.left} x2=${WIDTH - PAD.right} y1=${y(max * f)} y2=${y(max * f)} class="grid" />
          <text x=${PAD.left - 6} y=${y(max * f) + 4} class="axis" text-anchor="end">${axis(max * f)}</text>
        </g>`)}
        ${days.map((d, i) => {
          const x = PAD.left + i * slot + (slot - barW) / 2;
          let below = 0;
          const parts = series.map((entry) => {
            const from = below;
            below += d[entry.key] || 0;
            return html`<rect x=${x} y=${y(below)} width=${barW} height=${Math.max(0, y(from) - y(below))}
              class=${entry.class} fill=${entry.color} />`;
          });
          return html`<g class=${i === at ? "bar bar-at" : "bar"}>
            <rect x=${PAD.left + i * slot} y=${PAD.top} width=${slot} height=${plotH} class="bar-hit" />
            ${parts}
            ${i % labelEvery === 0 ? html`<text x=${PAD.left + i * slot + slot / 2} y=${HEIGHT - 6} class="axis" text-anchor="middle">${shortDay(d.day)}</text>` : null}
          </g>`;
        })}
      </svg>
    </div>
    <div class="chart-foot">
      <p class="legend">${series.map((entry) => html`<${Swatch} entry=${entry} />${entry.label} `)}</p>
      <p id=${readout} class="readout" aria-live="polite">${point ? describe(point) : "Point at a day, or select the chart and use the arrow keys."}</p>
      <button type="button" class="link-button" aria-expanded=${asTable ? "true" : "false"} onClick=${() => setAsTable(!asTable)}>
        ${asTable ? "Hide the table" : "View as table"}
      </button>
    </div>
    ${asTable ? html`<div class="table-scroll" tabindex="0" role="region" aria-label=${`${label}, as a table`}><table class="table">
      <caption class="visually-hidden">${label}</caption>
      <thead><tr><th scope="col">Day</th>${series.map((entry) => html`<th scope="col" class="num">${entry.label}</th>`)}</tr></thead>
      <tbody>${counted.length ? counted.map((d) => html`<tr><td>${day(d.day)}</td>
        ${series.map((entry) => html`<td class="num">${value(d[entry.key] || 0)}</td>`)}</tr>`)
        : html`<tr><td colspan=${series.length + 1}>${empty}</td></tr>`}</tbody>
    </table></div>` : null}
  </div>`;
}
