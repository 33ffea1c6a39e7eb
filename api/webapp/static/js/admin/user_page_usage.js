// Budget and usage on A User's page: the User's own Usage document (GET /v1/admin/users/<id>/usage-page
// answers what GET /account/usage answers them) shown with Usage's own parts, for the days, key and
// model that the admin chooses; the address keeps the choice, as on Usage.
import { html } from "../html.js";
import { LoadFailed } from "../components/load_failed.js";
import { daysOf } from "../components/days.js";
import { utcClock } from "../components/format.js";
import { UsageFilters, UsageNumbers, keyChoices, usageQuery, useUsageDoc } from "../components/usage_parts.js";
import { setQuery } from "../router.js";
import { UserPart } from "./user_page_parts.js";

// The admin's words for the User's account, where Usage says "your".
const THEIRS = {
  narrowedAllowance: "The account's monthly allowance", narrowedBudget: "The account's token budget",
  requestMore: false, noBudgetChanges: "No changes to their Budget yet.", ownBudget: "Their Budget",
};

export function choiceOf(query) {
  return { ...daysOf(query), key: query.get("key") || "", model: query.get("model") || "" };
}

export function BudgetAndUsage({ userId, query, keys, models }) {
  const choice = choiceOf(query);
  const [state, load, retry] = useUsageDoc(`v1/admin/users/${userId}/usage-page?${usageQuery(choice)}`);
  const pick = (changes) => setQuery({ ...choice, ...changes });
  const doc = state.doc;
  let body;
  if (doc) body = html`<${UsageNumbers} doc=${doc} choice=${choice} pick=${pick} words=${THEIRS} models=${models} />`;
  else if (state.failed && !state.error) {
    body = html`<${LoadFailed} text=${`Could not read their usage. ${state.reason || ""}`} onRetry=${retry} />`;
  } else if (!state.failed) body = html`<p role="status">Loading…</p>`;
  return html`<${UserPart} id="user-usage" title="Budget and usage" wide>
    <div class="user-usage-side">
      ${doc ? html`<span class="muted">Updated ${utcClock(new Date(doc.updated_at))}</span>` : null}
      <button type="button" onClick=${doc ? load : retry}>Refresh</button>
      ${doc && state.failed ? html`<span class="warn-text" role="status">Could not refresh</span>` : null}
    </div>
    <${UsageFilters} name="user-usage" choice=${choice} keys=${keyChoices(keys || [], doc)} models=${models} pick=${pick} />
    ${state.error ? html`<p class="form-error" role="alert">${state.error}</p>` : null}
    ${body}
  </${UserPart}>`;
}
