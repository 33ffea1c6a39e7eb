// Tokens per day: stacked SVG bars (input under output). Point at a day, or
// focus the chart and use the arrow keys, Home and End, to read its numbers.
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

function describe(point) {
  return `${day(point.day)}: ${number(point.input)} input and ${number(point.output)} output tokens`;
}

export function DayChart({ days, label = "Tokens per day" }) {
  const [at, setAt] = useState(null);
  const [asTable, setAsTable] = useState(false);
  const svg = useRef(null);
  const frame = useRef(null);
  const [WIDTH, setWidth] = useState(720);
  const HEIGHT = WIDTH < 500 ? 180 : 220;
  useEffect(() => {
    // Drawn in the frame's own pixels, so the axis text keeps its size on a phone.
    const observer = new ResizeObserver(([entry]) => setWidth(Math.max(200, Math.floor(entry.contentRect.width))));
    observer.observe(frame.current);
    return () => observer.disconnect();
  }, []);
  const max = niceMax(Math.max(0, ...days.map((d) => d.input + d.output)));
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
  const withCompletions = days.filter((d) => d.input + d.output > 0);
  return html`<div class="chart">
    <div class="chart-frame" ref=${frame} tabindex="0" role="group" aria-label=${`${label}. Use the left and right arrow keys to read each day.`}
      aria-describedby="chart-readout" onKeyDown=${onKey}>
      <svg ref=${svg} width=${WIDTH} height=${HEIGHT} viewBox=${`0 0 ${WIDTH} ${HEIGHT}`} aria-hidden="true"
        onPointerMove=${onPointer} onPointerDown=${onPointer}>
        ${[0, 0.5, 1].map((f) => html`<g>
          <line x1=${PAD.left} x2=${WIDTH - PAD.right} y1=${y(max * f)} y2=${y(max * f)} class="grid" />
          <text x=${PAD.left - 6} y=${y(max * f) + 4} class="axis" text-anchor="end">${compact(max * f)}</text>
        </g>`)}
        ${days.map((d, i) => {
          const x = PAD.left + i * slot + (slot - barW) / 2;
          return html`<g class=${i === at ? "bar bar-at" : "bar"}>
            <rect x=${PAD.left + i * slot} y=${PAD.top} width=${slot} height=${plotH} class="bar-hit" />
            <rect x=${x} y=${y(d.input)} width=${barW} height=${Math.max(0, PAD.top + plotH - y(d.input))} class="bar-input" />
            <rect x=${x} y=${y(d.input + d.output)} width=${barW} height=${Math.max(0, y(d.input) - y(d.input + d.output))} class="bar-output" />
            ${i % labelEvery === 0 ? html`<text x=${PAD.left + i * slot + slot / 2} y=${HEIGHT - 6} class="axis" text-anchor="middle">${shortDay(d.day)}</text>` : null}
          </g>`;
        })}
      </svg>
    </div>
    <div class="chart-foot">
      <p class="legend"><span class="swatch swatch-input"></span>Input <span class="swatch swatch-output"></span>Output</p>
      <p id="chart-readout" class="readout" aria-live="polite">${point ? describe(point) : "Point at a day, or select the chart and use the arrow keys."}</p>
      <button type="button" class="link-button" aria-expanded=${asTable ? "true" : "false"} onClick=${() => setAsTable(!asTable)}>
        ${asTable ? "Hide the table" : "View as table"}
      </button>
    </div>
    ${asTable ? html`<div class="table-scroll" tabindex="0" role="region" aria-label=${`${label}, as a table`}><table class="table">
      <caption class="visually-hidden">${label}</caption>
      <thead><tr><th scope="col">Day</th><th scope="col" class="num">Input</th><th scope="col" class="num">Output</th></tr></thead>
      <tbody>${withCompletions.length ? withCompletions.map((d) => html`<tr><td>${day(d.day)}</td>
        <td class="num">${number(d.input)}</td><td class="num">${number(d.output)}</td></tr>`)
        : html`<tr><td colspan="3">No Completions on these days.</td></tr>`}</tbody>
    </table></div>` : null}
  </div>`;
}
