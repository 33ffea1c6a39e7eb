// The Admin page's Analytics tab (spec: "Read the platform's analytics"): the days at the top, as on
// Usage, then the tabs Users, Budget, Platform, Usage and Spend, each counted over those days. The
// address keeps the tab (?view=) and the days (range, or from and to), so a reload or a shared link
// opens the same; the numbers are read again every minute, and a failed read keeps the last ones.
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "../html.js";
import { LoadFailed } from "../components/load_failed.js";
import { api } from "../api.js";
import { DayPicker, daysOf, daysRange } from "../components/days.js";
import { day, utcClock } from "../components/format.js";
import { useUsageDoc } from "../components/usage_parts.js";
import { setQuery } from "../router.js";
import { BudgetView, PlatformView, UsageFilters, UsageView, UsersView } from "./analytics_views.js";

// [?view= value, the tab's label]; the first is the one that an address without a view opens.
const VIEWS = [["users", "Users"], ["budget", "Budget"], ["platform", "Platform"], ["usage", "Usage"], ["spend", "Spend"]];
const SHOWN = { users: UsersView, budget: BudgetView, platform: PlatformView, usage: UsageView };

/** The tablist of Analytics: the WAI-ARIA tabs pattern (arrows, Home and End move between tabs; only
 * the current one is in the Tab order), as the Admin page's own tabs. */
function ViewTabs({ current, onPick }) {
  const refs = useRef([]);
  const go = (index) => {
    const at = (index + VIEWS.length) % VIEWS.length;
    onPick(VIEWS[at][0]);
    requestAnimationFrame(() => refs.current[at]?.focus());
  };
  const onKey = (event, index) => {
    const moves = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: VIEWS.length - 1 };
    if (!(event.key in moves)) return;
    event.preventDefault();
    go(moves[event.key]);
  };
  return html`<div class="tabs analytics-tabs" role="tablist" aria-label="Analytics">
    ${VIEWS.map(([view, label], index) => html`<button type="button" role="tab" id=${`analytics-tab-${view}`}
      ref=${(node) => { refs.current[index] = node; }} aria-selected=${view === current ? "true" : "false"}
      aria-controls="analytics-panel" tabindex=${view === current ? "0" : "-1"}
      onClick=${() => go(index)} onKeyDown=${(event) => onKey(event, index)}>${label}</button>`)}
  </div>`;
}

function useServedModels() {
  const [models, setModels] = useState([]);
  useEffect(() => { api("account/models").then((answer) => setModels(answer.data)).catch(() => {}); }, []);
  return models;
}

/** One tab's numbers at `path`, read again every minute. The tab mounts anew for each path (its
 * key), so a view never shows another view's or other days' document while it reads its own. */
function Counted({ path, view, label, choice, models, pick }) {
  const [state, load, retry] = useUsageDoc(path);
  const [updated, setUpdated] = useState(null);
  useEffect(() => { if (state.doc) setUpdated(new Date()); }, [state.doc]);
  const doc = state.doc;
  if (!doc && state.failed && !state.error) {
    return html`<${LoadFailed} heading=${`Could not read the ${label} numbers`}
      text=${`${state.reason || "The App did not answer."} The tab has no numbers to show yet.`} onRetry=${retry} />`;
  }
  const Shown = SHOWN[view];
  return html`${view === "usage" ? html`<${UsageFilters} choice=${choice} doc=${doc} models=${models} pick=${pick} />` : null}
    ${state.error ? html`<p class="form-error" role="alert">${state.error}</p>` : null}
    <div class="analytics-read">
      ${doc ? html`<p class="range-note">${day(doc.from)} to ${day(doc.to)}, in UTC days</p>` : null}
      <p class="analytics-updated">
        ${updated ? html`<span class="updated">Updated ${utcClock(updated)}</span>` : null}
        <button type="button" onClick=${doc ? load : retry}>Refresh</button>
        ${doc && state.failed ? html`<span class="warn-text" role="status">Could not refresh</span>` : null}
      </p>
    </div>
    ${doc ? html`<${Shown} doc=${doc} models=${models} />`
      : state.failed ? null : html`<p class="loading" role="status">Loading…</p>`}`;
}

function tabPath(view, span, choice) {
  const query = new URLSearchParams(span);
  if (view === "usage" && choice.user) query.set("user_id", choice.user);
  if (view === "usage" && choice.model) query.set("model", choice.model);
  return `v1/admin/analytics/${view}?${query}`;
}

export default function Analytics({ route }) {
  const asked = route.query.get("view");
  const view = VIEWS.some(([name]) => name === asked) ? asked : VIEWS[0][0];
  const label = VIEWS.find(([name]) => name === view)[1];
  const days = daysOf(route.query);
  const choice = { user: route.query.get("user") || "", model: route.query.get("model") || "" };
  const span = daysRange(days);
  const models = useServedModels();
  const [Spend, setSpend] = useState(null);
  useEffect(() => {
    // H5's Spend tab, loaded when first opened, as the Admin page loads its tabs.
    if (view === "spend" && !Spend) import("./spend.js").then((module) => setSpend(() => module.default));
  }, [view]);
  // The address keeps the view and the days; the Usage tab's User and model go with that tab only.
  const write = (next) => setQuery({ tab: "analytics", ...next });
  const pickDays = (changes) => write({ view, ...days, ...(view === "usage" ? choice : {}), ...changes });
  const pickView = (next) => write({ view: next, ...days });
  const pickChoice = (changes) => write({ view, ...days, ...choice, ...changes });
  const path = SHOWN[view] ? tabPath(view, span, choice) : null;
  return html`<div class="analytics">
    <div class="filters analytics-filters"><${DayPicker} name="analytics" days=${days} pick=${pickDays} /></div>
    <${ViewTabs} current=${view} onPick=${pickView} />
    <div class="analytics-panel" id="analytics-panel" role="tabpanel" aria-labelledby=${`analytics-tab-${view}`}>
      ${path ? html`<${Counted} key=${path} path=${path} view=${view} label=${label} choice=${choice} models=${models}
          pick=${pickChoice} />`
        : Spend ? html`<${Spend} route=${route} days=${span} />` : html`<p class="loading" role="status">Loading…</p>`}
    </div>
  </div>`;
}
