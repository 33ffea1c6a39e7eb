// The Definitions at the bottom of Analytics' Users, Budget and Platform tabs: how each number is
// counted (spec: "Read the platform's analytics"), as ledger/tokens/analytics.py counts it.
import { html } from "../html.js";

const COMMON = ["Days", "UTC days, from the first day chosen at the top to the last. A Completion counts on the day that it started."];
const TEAM = ["The team's accounts", "Admins. They are left out of every number about Users on this tab."];
const REFUSED = ["Completions", "Requests that Inference served. A Completion that Inference refused before its first token counts for none of these numbers."];

export const USERS = [
  ["Applications waiting", "Applications that no admin has approved or rejected yet, as of now, whatever the days."],
  ["New Users", "Users whose account was made on the days: an admin approved their Application, they used an Invite, or an admin made the account."],
  ["Ran a Completion within 24 hours", "Of the new Users, those whose first Completion started within 24 hours of getting access."],
  ["Active in the last 7 days", "Users whose newest Completion started in the last 7 days, counted back from now."],
  ["Active Users", "In Daily numbers: the Users who ran a Completion that day."],
  ["Feedback", "The notes sent with Send feedback that day, anonymous ones included."],
  TEAM, REFUSED, COMMON,
];

export const BUDGET = [
  ["At their allowance", "Users who used all of their monthly allowance this UTC month, whatever the days chosen."],
  ["Close to their allowance", "Users who used 90% or more of their monthly allowance this month, but not all of it."],
  ["Requests the Budget could not hold", "Requests refused with 429 budget_exceeded on the days: the tokens left in the monthly allowance and the Budget could not hold them."],
  ["Closest to their allowance", "The 10 Users who used the largest share of their allowance this month, of those who used any."],
  ["Runs out", "The day that the allowance runs out if the User goes on at their pace of this month so far. Not this month: it lasts to the month's end at that pace."],
  TEAM, COMMON,
];

export const PLATFORM = [
  ["Requests", "The Completions that started on the day, by how they ended. Completed: Inference finished it. Failed: Inference failed it after its first token. Stopped: its client went away, or its Job, Branch or Run was stopped."],
  ["Server errors", "The API's answers on the day that were an error of its own or of Inference, with a status of 500 or more, such as internal_error or upstream_unreachable, a timeout left out. An error event inside a stream that had begun counts as Failed, not here, and a busy database's 503 (db_pool_exhausted) only in the API's /metrics."],
  ["Timeouts", "The answers on the day where Inference did not answer within 14 minutes (504 upstream_deadline)."],
  ["By source", "The Completions and tokens, input and output, of the API, the Playground, the Loom, Jobs and Harvests."],
  ["By model", "The Completions and tokens of each model, with the GPU spend of the days for that model."],
  ["Users of each hour", "How many Users ran a Completion in each hour of the day, on that time zone's clock, on any of the days. A User counts once in an hour. Admins are left out."],
  ["GPU spend", "What the GPUs cost, as Spend counts it: the API estimates it from Inference's count of its containers each minute. It is not Modal's bill."],
  REFUSED, COMMON,
];

export function Definitions({ terms }) {
  return html`<section class="part part-wide definitions" aria-labelledby="analytics-definitions">
    <h2 id="analytics-definitions">Definitions</h2>
    <dl>${terms.map(([term, text]) => html`<div class="definition"><dt>${term}</dt><dd>${text}</dd></div>`)}</dl>
  </section>`;
}
