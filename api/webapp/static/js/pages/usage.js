// Usage: the tokens used and left, for chosen days, key and model. The
// address keeps the choice; the numbers are read again every minute. The parts are
// components/usage_parts.js, which A User's page on Admin shows too.
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { LoadFailed } from "../components/load_failed.js";
import { api } from "../api.js";
import { daysOf } from "../components/days.js";
import { utcClock } from "../components/format.js";
import { UsageFilters, UsageNumbers, keyChoices, usageQuery, useUsageDoc } from "../components/usage_parts.js";
import { PageHeader } from "../notice.js";
import { setQuery } from "../router.js";

function choiceOf(query) {
  return { ...daysOf(query), key: query.get("key") || "", model: query.get("model") || "" };
}

function useChoices() {
  const [keys, setKeys] = useState([]);
  const [models, setModels] = useState([]);
  useEffect(() => {
    api("account/keys").then((answer) => setKeys(answer.data)).catch(() => {});
    api("account/models").then((answer) => setModels(answer.data)).catch(() => {});
  }, []);
  return [keys, models];
}

export default function Usage({ route }) {
  const choice = choiceOf(route.query);
  const [state, load, retry] = useUsageDoc(`account/usage?${usageQuery(choice)}`);
  const [keys, models] = useChoices();
  const doc = state.doc;
  const pick = (changes) => setQuery({ ...choice, ...changes });
  // A first read that failed for another reason than the days chosen: no numbers to keep, so the
  // page says what failed and offers another try instead of filters over nothing.
  const unread = !doc && state.failed && !state.error;
  const side = html`${doc ? html`<span class="updated">Updated ${utcClock(new Date(doc.updated_at))}</span>` : null}
    <button type="button" onClick=${doc ? load : retry}>Refresh</button>
    ${doc && state.failed ? html`<span class="warn-text" role="status">Could not refresh</span>` : null}`;
  if (unread) {
    return html`<${PageHeader} title="Usage">${side}</${PageHeader}>
      <${LoadFailed} heading="Could not read your usage"
        text=${`${state.reason || "The App did not answer."} The page has no numbers to show yet.`} onRetry=${retry} />`;
  }
  return html`<${PageHeader} title="Usage">${side}</${PageHeader}>
    <${UsageFilters} name="usage" choice=${choice} keys=${keyChoices(keys, doc)} models=${models} pick=${pick} />
    ${state.error ? html`<p class="form-error" role="alert">${state.error}</p>` : null}
    ${doc ? html`<${UsageNumbers} doc=${doc} choice=${choice} pick=${pick} models=${models} />` : state.failed ? null : html`<p role="status">Loading…</p>`}`;
}
