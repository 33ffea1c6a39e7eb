// The Admin page's Token requests tab (spec: "Decide token requests"): each request with the User, the tokens
// asked, the project ("None" for a request sent before the form asked for one), the status, the tokens granted,
// and who decided it and when. A row's menu reads the request, approves it with Tokens to grant (starting at
// the tokens asked), or rejects it with a Note to them.
import { html } from "../html.js";
import { api } from "../api.js";
import { Dialog } from "../components/dialog.js";
import { FormError } from "../components/field.js";
import { compact, number, when } from "../components/format.js";
import { Link } from "../components/link.js";
import { Menu } from "../components/menu.js";
import { modelList, useModels } from "../components/model_name.js";
import { Answers, DecisionButtons, DecisionDialog, StatusBadge, decided, decisionItems, useDecisionList } from "./applications_answers.js";

/** The tokens as the field takes them, exactly: 100M, 50K, else the whole number, such as 2500000 (compact()
 * rounds). */
export function exactTokens(tokens) {
  if (tokens >= 1e9 && tokens % 1e9 === 0) return `${tokens / 1e9}B`;
  if (tokens >= 1e6 && tokens % 1e6 === 0) return `${tokens / 1e6}M`;
  if (tokens < 1e6 && tokens >= 1e3 && tokens % 1e3 === 0) return `${tokens / 1e3}K`;
  return String(tokens);
}

// Request more tokens' questions, in its order and with its labels (pages/token_request.js). A request sent
// before the form had them keeps its reason in planned_usage, so it shows under Planned usage.
function questions(item, models) {
  return [["Tokens", `${number(item.tokens)} (${compact(item.tokens)})`], ["Models", modelList(models, item.models)],
    ["Project", item.project], ["Planned usage", item.planned_usage],
    ["How you got the number", item.how_you_got_the_number], ["Results", item.results], ["Links", item.links],
    ["When you need them", item.when_needed]];
}

const who = (item) => item.user.name || item.user.email || item.user.id;

function ReadDialog({ item, onApprove, onReject, onClose }) {
  const models = useModels();
  if (!item) return null;
  const facts = [["User", html`<${Link} to=${`/admin/users/${item.user.id}`}>${who(item)}</${Link}>`],
    ["Email", item.user.email || "None"], ["Sent", when(item.created_at)],
    ["Status", html`<${StatusBadge} status=${item.status} />`]];
  if (item.status === "approved") facts.push(["Tokens granted", number(item.granted)]);
  if (item.decided_at) facts.push(["Decided", decided(item)]);
  if (item.status === "rejected") facts.push(["Note to them", item.note || "None"]);
  return html`<${Dialog} open=${true} title=${`Request of ${who(item)}`} onCancel=${onClose} class="dialog-read">
    <${Answers} questions=${questions(item, models)} />
    <dl class="facts decision-facts">${facts.map(([label, value]) => html`<dt>${label}</dt><dd>${value}</dd>`)}</dl>
    <${DecisionButtons} item=${item} onApprove=${onApprove} onReject=${onReject} onClose=${onClose} />
  </${Dialog}>`;
}

function Row({ item, onRead, onApprove, onReject }) {
  const items = decisionItems(item, "Read the request", { onRead, onApprove, onReject });
  const granted = item.granted === null || item.granted === undefined ? "—" : compact(item.granted);
  return html`<tr>
    <td class="requester"><${Link} to=${`/admin/users/${item.user.id}`} class="cut" title=${who(item)}>${who(item)}</${Link}>
      ${item.user.email && item.user.email !== who(item) ? html`<span class="cut muted" title=${item.user.email}>${item.user.email}</span>` : null}</td>
    <td class="num nowrap" title=${number(item.tokens)}>${compact(item.tokens)}</td>
    <td class="project"><span class="cut" title=${item.project || "None"}>${item.project || "None"}</span></td>
    <td><${StatusBadge} status=${item.status} />
      ${item.note ? html`<span class="phone-only note-under">${item.note}</span>` : null}</td>
    <td class="num nowrap" title=${granted === "—" ? undefined : number(item.granted)}>${granted}</td>
    <td class="wide decided">${decided(item)}</td>
    <td class="row-menu"><${Menu} label=${html`<span aria-hidden="true">⋯</span>`}
      ariaLabel=${`Actions of the request of ${who(item)}`} items=${items} floating=${true} /></td>
  </tr>`;
}

function Table({ requests, ...actions }) {
  if (!requests.length) return html`<p>No token requests yet.</p>`;
  return html`<div class="table-scroll" tabindex="0" role="region" aria-label="Token requests">
    <table class="table token-requests-table">
      <caption class="visually-hidden">Token requests, the waiting ones first</caption>
      <thead><tr>
        <th scope="col">User</th><th scope="col" class="num">Tokens asked</th><th scope="col">Project</th>
        <th scope="col">Status</th><th scope="col" class="num">Tokens granted</th><th scope="col" class="wide">Decided</th>
        <th scope="col"><span class="visually-hidden">Actions</span></th>
      </tr></thead>
      <tbody>${requests.map((item) => html`<${Row} key=${item.id} item=${item} ...${actions} />`)}</tbody>
    </table>
  </div>`;
}

export default function TokenRequests() {
  const { items: requests, failed, dialog, setDialog, done, statusRef: status, finish } =
    useDecisionList("v1/admin/token-requests", "token_requests");
  async function approve(tokens) {
    const item = dialog.item;
    const answer = await api(`v1/admin/token-requests/${item.id}/approve`, { method: "POST", body: { tokens: tokens.trim() } });
    finish(`Approved the request of ${who(item)}: ${number(answer.granted)} tokens granted to their Budget.`);
  }
  async function reject(note) {
    const item = dialog.item;
    await api(`v1/admin/token-requests/${item.id}/reject`, { method: "POST", body: { note: note.trim() } });
    finish(`Rejected the request of ${who(item)}.`);
  }
  const open = (kind) => (item) => setDialog({ kind, item });
  const subject = (kind) => (dialog?.kind === kind ? dialog.item : null);
  const waiting = requests ? requests.filter((item) => item.status === "waiting").length : 0;
  const asked = subject("approve");

  return html`<div class="admin-token-requests">
    <div class="decide-head">
      <h2 id="token-requests-title">Token requests</h2>
      ${requests ? html`<span class="muted">${waiting} waiting</span>` : null}
    </div>
    <p class="status-line" role="status" tabindex="-1" ref=${status}>${done}</p>
    ${requests ? html`<${Table} requests=${requests} onRead=${open("read")} onApprove=${open("approve")}
      onReject=${open("reject")} />` : failed ? null : html`<p role="status">Loading…</p>`}
    <${FormError} message=${failed && `Could not read the token requests: ${failed}`} />
    <${ReadDialog} item=${subject("read")} onApprove=${open("approve")} onReject=${open("reject")}
      onClose=${() => setDialog(null)} />
    <${DecisionDialog} subject=${asked} title=${`Approve the request of ${asked ? who(asked) : ""}`}
      text=${asked ? `They asked for ${number(asked.tokens)} tokens. The amount is a Grant to their Budget.` : ""}
      field=${{ name: "tokens", label: "Tokens to grant", initial: asked ? exactTokens(asked.tokens) : "",
        hint: "A number, such as 50K or 2500000." }}
      action="Approve" onDecide=${approve} onClose=${() => setDialog(null)} />
    <${DecisionDialog} subject=${subject("reject")} title=${`Reject the request of ${subject("reject") ? who(subject("reject")) : ""}`}
      text="They read the note with their request."
      field=${{ name: "note", label: "Note to them", optional: true, multiline: true }}
      action="Reject" danger=${true} onDecide=${reject} onClose=${() => setDialog(null)} />
  </div>`;
}
