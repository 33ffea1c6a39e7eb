// The Admin page's Applications tab (spec: "Get access"): every Application, the waiting ones first, each read
// with every answer of the Apply form, approved (the approval email with its password link) or rejected with
// a note; and Make Invites, with a Tag and Tokens.
import { html } from "../html.js";
import { api } from "../api.js";
import { Dialog } from "../components/dialog.js";
import { FormError } from "../components/field.js";
import { when } from "../components/format.js";
import { Link } from "../components/link.js";
import { Menu } from "../components/menu.js";
import { Answers, DecisionButtons, DecisionDialog, StatusBadge, decided, decisionItems, useDecisionList } from "./applications_answers.js";
import { InviteDialog } from "./applications_invite.js";

// The Apply form's questions, in its order and with its labels (pages/apply.js).
const QUESTIONS = [["Email", "email"], ["Name", "name"], ["Organization", "organization"],
  ["Planned usage", "planned_usage"], ["How did you hear of ACS Infra?", "how_you_heard"],
  ["Links to your work", "links"], ["How many tokens do you expect to need?", "expected_tokens"]];

function ReadDialog({ item, onApprove, onReject, onClose }) {
  if (!item) return null;
  const facts = [["Applied", when(item.created_at)], ["Status", html`<${StatusBadge} status=${item.status} />`]];
  if (item.decided_at) facts.push(["Decided", decided(item)]);
  if (item.status === "rejected") facts.push(["Note to them", item.note || "None"]);
  if (item.user_id) facts.push(["User", html`<${Link} to=${`/admin/users/${item.user_id}`}>Open their page</${Link}>`]);
  return html`<${Dialog} open=${true} title=${`Application of ${item.name}`} onCancel=${onClose} class="dialog-read">
    <${Answers} questions=${QUESTIONS.map(([label, name]) => [label, item[name]])} />
    <dl class="facts decision-facts">${facts.map(([label, value]) => html`<dt>${label}</dt><dd>${value}</dd>`)}</dl>
    <${DecisionButtons} item=${item} onApprove=${onApprove} onReject=${onReject} onClose=${onClose} />
  </${Dialog}>`;
}

function Row({ item, onRead, onApprove, onReject }) {
  const items = decisionItems(item, "Read the application", { onRead, onApprove, onReject });
  return html`<tr>
    <td class="applicant"><span class="cut" title=${item.email}>${item.email}</span>
      <span class="phone-only muted applicant-more">${item.name}, ${when(item.created_at)}</span></td>
    <td class="wide"><span class="cut" title=${item.name}>${item.name}</span></td>
    <td class="wide"><span class="cut" title=${item.organization}>${item.organization}</span></td>
    <td class="nowrap wide">${when(item.created_at)}</td>
    <td><${StatusBadge} status=${item.status} /></td>
    <td class="wide decided">${decided(item)}</td>
    <td class="row-menu"><${Menu} label=${html`<span aria-hidden="true">⋯</span>`} ariaLabel=${`Actions of ${item.email}`}
      items=${items} floating=${true} /></td>
  </tr>`;
}

function Table({ applications, ...actions }) {
  if (!applications.length) return html`<p>No applications yet.</p>`;
  return html`<div class="table-scroll" tabindex="0" role="region" aria-label="Applications">
    <table class="table applications-table">
      <caption class="visually-hidden">Applications, the waiting ones first</caption>
      <thead><tr>
        <th scope="col">Email</th><th scope="col" class="wide">Name</th><th scope="col" class="wide">Organization</th>
        <th scope="col" class="wide">Applied</th><th scope="col">Status</th><th scope="col" class="wide">Decided</th>
        <th scope="col"><span class="visually-hidden">Actions</span></th>
      </tr></thead>
      <tbody>${applications.map((item) => html`<${Row} key=${item.id} item=${item} ...${actions} />`)}</tbody>
    </table>
  </div>`;
}

export default function Applications() {
  const { items: applications, failed, dialog, setDialog, done, statusRef: status, finish } =
    useDecisionList("v1/admin/applications", "applications");
  async function approve(tokens) {
    const item = dialog.item;
    const body = tokens.trim() ? { tokens: tokens.trim() } : {};
    await api(`v1/admin/applications/${item.id}/approve`, { method: "POST", body });
    finish(`Approved ${item.email}. The approval email has the link to choose a password.`);
  }
  async function reject(note) {
    const item = dialog.item;
    await api(`v1/admin/applications/${item.id}/reject`, { method: "POST", body: { note: note.trim() } });
    finish(`Rejected ${item.email}. The email links to the Apply form.`);
  }
  const open = (kind) => (item) => setDialog({ kind, item });
  const waiting = applications ? applications.filter((item) => item.status === "waiting").length : 0;
  const subject = (kind) => (dialog?.kind === kind ? dialog.item : null);

  return html`<div class="admin-applications">
    <div class="decide-head">
      <h2 id="applications-title">Applications</h2>
      ${applications ? html`<span class="muted">${waiting} waiting</span>` : null}
      <button type="button" class="primary" onClick=${() => setDialog({ kind: "invite" })}>Make Invites</button>
    </div>
    <p class="status-line" role="status" tabindex="-1" ref=${status}>${done}</p>
    ${applications ? html`<${Table} applications=${applications} onRead=${open("read")} onApprove=${open("approve")}
      onReject=${open("reject")} />` : failed ? null : html`<p role="status">Loading…</p>`}
    <${FormError} message=${failed && `Could not read the Applications: ${failed}`} />
    <${ReadDialog} item=${subject("read")} onApprove=${open("approve")} onReject=${open("reject")}
      onClose=${() => setDialog(null)} />
    <${DecisionDialog} subject=${subject("approve")} title=${`Approve ${subject("approve")?.name || ""}?`}
      text="The App makes their User and emails them “Your ACS Infra application is approved”, with a link to choose their password. The link works once, for 7 days."
      field=${{ name: "tokens", label: "Tokens", optional: true, hint: "Tokens for their Budget, beside the monthly allowance, such as 50K or 2.5M." }}
      action="Approve" onDecide=${approve} onClose=${() => setDialog(null)} />
    <${DecisionDialog} subject=${subject("reject")} title=${`Reject ${subject("reject")?.name || ""}?`}
      text="The App emails them that an admin did not approve their application, with a link to the Apply form."
      field=${{ name: "note", label: "Note to them", optional: true, multiline: true, hint: "The email quotes it." }}
      action="Reject" danger=${true} onDecide=${reject} onClose=${() => setDialog(null)} />
    <${InviteDialog} open=${dialog?.kind === "invite"} onClose=${() => setDialog(null)} />
  </div>`;
}
