// The four tabs of Analytics that GET /v1/admin/analytics/<tab> counts (Spend is admin/spend.js):
// each shows a read document's numbers, with a chart that reads by keyboard and as a table (chart.js),
// Daily numbers and, on Users, Budget and Platform, the Definitions.
import { html } from "../html.js";
import { DayChart } from "../chart.js";
import { capital, day, number, stamp, usd } from "../components/format.js";
import { Link } from "../components/link.js";
import { ModelId, ModelSelect, modelChoices } from "../components/model_name.js";
import { Name, Part, Stat, Table } from "../components/usage_parts.js";
import { BUDGET, Definitions, PLATFORM, USERS } from "./analytics_definitions.js";

// The ledger's names of the sources, as the App names them (spec: "Read your usage").
const SOURCES = { api: "API", playground: "Playground", loom: "Loom", job: "Jobs", harvest: "Harvests" };
const COUNTED = { reported: "Reported", partial: "Partial", held: "Held" };
// The five time zones of Users of each hour, as the ledger lists them, by a city's name.
const ZONES = { "America/Los_Angeles": "Los Angeles", "America/New_York": "New York", UTC: "UTC",
  "Europe/Berlin": "Berlin", "Asia/Tokyo": "Tokyo" };
const BLUE = "#2f6fde";
const RED = "#c2410c";
const GRAY = "#8a93a3";

function seconds(value) {
  if (value === null || value === undefined) return "—";
  return value < 60 ? `${value.toFixed(1)} s` : `${Math.floor(value / 60)} min ${Math.round(value % 60)} s`;
}

function percent(share) {
  // From the counts, not the API's share_used, which rounds 6 of 5,000,000 to 0.
  if (share > 0 && share < 0.001) return "<0.1%"; // some tokens used: not 0%
  return `${Math.round(share * 1000) / 10}%`;
}

/** Daily numbers: each day from the first to the last, a column for each of `columns`
 * ([field, label, format]). */
function DailyNumbers({ days, columns }) {
  return html`<${Part} title="Daily numbers" wide><${Table} caption="Daily numbers" empty="No days."
    head=${[["Day"], ...columns.map(([, label]) => [label, "num"])]}
    rows=${days.map((d) => html`<tr><td class="nowrap">${day(d.day)}</td>
      ${columns.map(([field, , format]) => html`<td class="num">${(format || number)(d[field])}</td>`)}</tr>`)} /></${Part}>`;
}

function Big({ title, value, sub }) {
  return html`<${Stat} title=${title}><p class="big">${value}</p>${sub ? html`<p class="sub">${sub}</p>` : null}</${Stat}>`;
}

export function UsersView({ doc }) {
  const feedback = doc.daily.reduce((sum, d) => sum + (d.feedback || 0), 0);
  return html`<div class="stats">
      <${Big} title="Applications waiting" value=${number(doc.applications_waiting)}
        sub=${html`<${Link} to="/admin?tab=applications">Decide Applications</${Link}>`} />
      <${Big} title="New Users" value=${number(doc.new_users)} sub=${`of ${number(doc.users)} Users`} />
      <${Big} title="Ran a Completion within 24 hours" value=${number(doc.new_users_active_within_24h)}
        sub=${`of ${number(doc.new_users)} new Users`} />
      <${Big} title="Active in the last 7 days" value=${number(doc.active_last_7_days)} sub="Users" />
      <${Big} title="Feedback" value=${number(feedback)} sub="notes on these days" />
    </div>
    <${Part} title="Active Users per day" wide>
      <${DayChart} days=${doc.daily} label="Active Users per day" series=${[{ key: "active_users", label: "Active Users", color: BLUE }]}
        describe=${(d) => `${day(d.day)}: ${number(d.active_users)} active Users, ${number(d.new_users)} new`}
        empty="No User ran a Completion on these days." />
    </${Part}>
    <${DailyNumbers} days=${doc.daily} columns=${[["new_users", "New Users"],
      ["new_users_active_within_24h", "Ran a Completion within 24 hours"], ["active_users", "Active Users"],
      ["feedback", "Feedback"]]} />
    <${Definitions} terms=${USERS} />`;
}

export function BudgetView({ doc }) {
  return html`<div class="stats">
      <${Big} title="At their allowance" value=${number(doc.at_allowance)} sub="Users, this month" />
      <${Big} title="Close to their allowance" value=${number(doc.near_allowance)} sub="Users at 90% or more, this month" />
      <${Big} title="Requests the Budget could not hold" value=${number(doc.refused_requests)} sub="on these days" />
    </div>
    <div class="parts">
      <${Part} title="Closest to their allowance" wide><${Table} caption="Closest to their allowance"
        empty="No User used any of their allowance this month."
        head=${[["User"], ["Used", "num"], ["Allowance", "num"], ["Share", "num"], ["Runs out"]]}
        rows=${doc.closest.map((line) => html`<tr>
          <td><${Link} to=${`/admin/users/${line.user.id}`} class="cut-name" title=${line.user.name}>${line.user.name}</${Link}></td>
          <td class="num">${number(line.allowance_used)}</td><td class="num">${number(line.monthly_allowance)}</td>
          <td class="num">${percent(line.monthly_allowance > 0 ? line.allowance_used / line.monthly_allowance : 1)}</td>
          <td class="nowrap">${line.runs_out_on ? day(line.runs_out_on) : "Not this month"}</td></tr>`)} /></${Part}>
      <${Part} title="Refused requests per day" wide>
        <${DayChart} days=${doc.daily} label="Refused requests per day"
          series=${[{ key: "refused_requests", label: "Refused requests", color: RED }]}
          describe=${(d) => `${day(d.day)}: ${number(d.refused_requests)} requests that the Budget could not hold`}
          empty="The Budget held every request on these days." />
      </${Part}>
    </div>
    <${DailyNumbers} days=${doc.daily} columns=${[["refused_requests", "Refused requests"]]} />
    <${Definitions} terms=${BUDGET} />`;
}

const ENDED = [{ key: "completed", label: "Completed", color: BLUE }, { key: "failed", label: "Failed", color: RED },
  { key: "stopped", label: "Stopped", color: GRAY }];

export function PlatformView({ doc, models }) {
  const total = (field) => doc.daily.reduce((sum, d) => sum + (d[field] || 0), 0);
  const spend = Object.fromEntries(doc.spend_by_model.map((s) => [s.model, s.usd]));
  const byModel = [...doc.by_model];
  for (const s of doc.spend_by_model) if (!byModel.some((m) => m.name === s.model)) byModel.push({ name: s.model, completions: 0, tokens: 0 });
  return html`<div class="stats">
      <${Big} title="Requests" value=${number(total("requests"))} sub=${`${number(total("completed"))} completed`} />
      <${Big} title="Failed" value=${number(total("failed"))} sub="after their first token" />
      <${Big} title="Stopped" value=${number(total("stopped"))} sub="before Inference finished" />
      <${Big} title="Server errors" value=${number(total("server_errors"))} sub="answers of 500 or more" />
      <${Big} title="Timeouts" value=${number(total("timeouts"))} sub="Inference took over 14 minutes" />
      <${Big} title="GPU spend" value=${usd(total("gpu_usd"))} sub="on these days, as Spend counts it" />
    </div>
    <${Part} title="Requests per day" wide>
      <${DayChart} days=${doc.daily} label="Requests per day" series=${ENDED}
        describe=${(d) => `${day(d.day)}: ${number(d.completed)} completed, ${number(d.failed)} failed and ${number(d.stopped)} stopped`}
        empty="No requests on these days." />
    </${Part}>
    <div class="parts">
      <${Part} title="By source"><${Table} caption="By source" empty="No Completions."
        head=${[["Source"], ["Completions", "num"], ["Tokens", "num"]]}
        rows=${doc.by_source.map((s) => html`<tr><td>${SOURCES[s.name] || s.name}</td>
          <td class="num">${number(s.completions)}</td><td class="num">${number(s.tokens)}</td></tr>`)} /></${Part}>
      <${Part} title="By model"><${Table} caption="By model" empty="No Completions."
        head=${[["Model"], ["Completions", "num"], ["Tokens", "num"], ["GPU spend", "num"]]}
        rows=${byModel.map((m) => html`<tr><td><${ModelId} id=${m.name} models=${models} /></td>
          <td class="num">${number(m.completions)}</td><td class="num">${number(m.tokens)}</td>
          <td class="num">${usd(spend[m.name] || 0)}</td></tr>`)} /></${Part}>
      <${Part} title="Users of each hour" wide><${Table} caption="Users of each hour, in five time zones" empty="No hours." dense
        head=${[["Hour"], ...doc.users_by_hour.map((z) => [ZONES[z.time_zone] || z.time_zone, "num"])]}
        rows=${Array.from({ length: 24 }, (_, hour) => html`<tr><td class="nowrap">${String(hour).padStart(2, "0")}:00</td>
          ${doc.users_by_hour.map((z) => html`<td class="num">${number(z.users[hour])}</td>`)}</tr>`)} /></${Part}>
    </div>
    <${DailyNumbers} days=${doc.daily} columns=${[["requests", "Requests"], ["completed", "Completed"], ["failed", "Failed"],
      ["stopped", "Stopped"], ["server_errors", "Server errors"], ["timeouts", "Timeouts"], ["gpu_usd", "GPU spend", usd]]} />
    <${Definitions} terms=${PLATFORM} />`;
}

/** All Users and All models: the Usage tab's choice of one User or one model. */
export function UsageFilters({ choice, doc, models, pick }) {
  const users = doc ? [...doc.users] : [];
  if (choice.user && !users.some((u) => u.id === choice.user)) users.push({ id: choice.user, name: choice.user });
  const chosen = users.find((u) => u.id === choice.user);
  const counted = doc ? doc.by_model.map((m) => m.name) : [];
  return html`<div class="selects analytics-choice">
    <div class="field field-inline"><label for="analytics-user">User</label>
      <select id="analytics-user" value=${choice.user} title=${chosen ? chosen.name : "All Users"}
        onChange=${(e) => pick({ user: e.currentTarget.value })}>
        <option value="">All Users</option>
        ${users.map((u) => html`<option value=${u.id}>${u.name}</option>`)}
      </select></div>
    <div class="field field-inline"><label for="analytics-model">Model</label>
      <${ModelSelect} id="analytics-model" value=${choice.model} models=${modelChoices(models, [choice.model, ...counted])}
        onChange=${(model) => pick({ model })} /></div>
  </div>`;
}

export function UsageView({ doc, models }) {
  const share = (title, rows, name) => html`<${Part} title=${title}><${Table} caption=${title} empty="No Completions."
    head=${[[title.replace("By ", "").replace(/^./, (c) => c.toUpperCase())], ["Completions", "num"], ["Tokens", "num"]]}
    rows=${rows.map((s) => html`<tr><td>${name(s.name)}</td><td class="num">${number(s.completions)}</td>
      <td class="num">${number(s.tokens)}</td></tr>`)} /></${Part}>`;
  return html`<div class="parts">
    ${share("By User", doc.by_user, (n) => html`<${Name} text=${n} />`)}
    ${share("By model", doc.by_model, (n) => html`<${ModelId} id=${n} models=${models} />`)}
    ${share("By source", doc.by_source, (n) => SOURCES[n] || n)}
    <${Part} title="Completions" wide><${Table} caption="Completions, newest 100" empty="No Completions on these days." dense
      head=${[["Started (UTC)"], ["User"], ["Model"], ["Source"], ["Key"], ["Tokens", "num"], ["Counted"], ["Duration", "num"], ["Status"]]}
      rows=${doc.newest_completions.map((c) => html`<tr><td class="nowrap">${stamp(c.started_at)}</td><td><${Name} text=${c.user} /></td>
        <td><${ModelId} id=${c.model} models=${models} /></td><td>${SOURCES[c.source] || c.source}</td>
        <td><${Name} text=${c.key_name} /></td><td class="num">${number(c.tokens)}</td>
        <td>${COUNTED[c.counted] || c.counted || "—"}</td><td class="num">${seconds(c.duration_s)}</td>
        <td>${capital(c.status)}</td></tr>`)} /></${Part}>
    <${Part} title="Budget changes" wide><${Table} caption="Budget changes, newest 100" empty="No changes to a Budget on these days."
      head=${[["When (UTC)"], ["User"], ["Tokens", "num"], ["Budget"], ["Note"]]}
      rows=${doc.newest_budget_changes.map((b) => html`<tr><td class="nowrap">${stamp(b.at)}</td><td><${Name} text=${b.user} /></td>
        <td class="num">${b.tokens > 0 ? "+" : ""}${number(b.tokens)}</td><td><${Name} text=${b.key_name || "The User's Budget"} /></td>
        <td>${b.note || ""}</td></tr>`)} /></${Part}>
  </div>`;
}
