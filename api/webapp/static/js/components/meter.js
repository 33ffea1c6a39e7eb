import { html } from "../html.js";

/** Used of total, orange from 90% used and red once spent. */
export function Meter({ used, total, label }) {
  const fraction = total > 0 ? Math.min(1, Math.max(0, used / total)) : used > 0 ? 1 : 0;
  const state = total > 0 && used >= total ? "spent" : fraction >= 0.9 ? "warn" : "ok";
  const percent = Math.round(fraction * 100);
  return html`<div class=${`meter meter-${state}`} role="meter" aria-label=${label}
      aria-valuemin="0" aria-valuemax="100" aria-valuenow=${percent} aria-valuetext=${`${percent}% used`}>
    <div class="meter-fill" style=${{ width: `${percent}%` }}></div>
  </div>`;
}
