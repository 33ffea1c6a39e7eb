// What the Applications and Token requests tabs share: someone's answers, each under its question ("Not
// answered" when empty), and the dialog of a decision (Approve, Reject) with its one field.
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { Dialog } from "../components/dialog.js";
import { Field, FormError, splitError } from "../components/field.js";
import { Form } from "../components/form.js";
import { when } from "../components/format.js";

export const NOT_ANSWERED = "Not answered";
export const STATUS = { waiting: "Waiting", approved: "Approved", rejected: "Rejected" };

export function StatusBadge({ status }) {
  return html`<span class=${`badge badge-${status}`}>${STATUS[status] || status}</span>`;
}

/** `questions`: [label, the answer's text]; an answer that is empty (or only spaces) says Not answered. */
export function Answers({ questions }) {
  return html`<dl class="answers">
    ${questions.map(([label, answer]) => {
      const text = answer === null || answer === undefined ? "" : String(answer).trim();
      return html`<div class="answer">
        <dt>${label}</dt>
        <dd class=${text ? "" : "not-answered"}>${text || NOT_ANSWERED}</dd>
      </div>`;
    })}
  </dl>`;
}

/** "Grace Admin, 05:02 UTC": who decided and when, the time on one line; "—" while it waits. */
export function decided(item) {
  if (!item.decided_at) return "—";
  const time = html`<span class="nowrap">${when(item.decided_at)}</span>`;
  return item.decided_by ? html`${item.decided_by}, ${time}` : time;
}

/** A decision's dialog: what it does, one field (`field`: {name, label, hint, multiline, initial, optional}),
 * Cancel and the action's button. `onDecide(value)` may throw the API's refusal, which shows under the field
 * that it names, else above the buttons; the dialog stays open. */
export function DecisionDialog({ subject, title, text, field, action, danger = false, onDecide, onClose }) {
  const [value, setValue] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  useLayoutEffect(() => {
    if (subject) { setValue(field.initial || ""); setError(null); }
  }, [subject]);
  async function submit() {
    setBusy(true);
    setError(null);
    try {
      await onDecide(value);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }
  const errors = splitError(error, [field.name]);
  return html`<${Dialog} open=${Boolean(subject)} title=${title} onCancel=${onClose}>
    <${Form} onSubmit=${submit}>
      ${text ? html`<p>${text}</p>` : null}
      <${Field} label=${field.label} value=${value} onInput=${setValue} hint=${field.hint} optional=${field.optional}
        multiline=${field.multiline} autocomplete="off" error=${errors.field[field.name]} />
      <${FormError} message=${errors.form} />
      <div class="actions actions-end">
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class=${danger ? "danger" : "primary"} disabled=${busy}>${action}</button>
      </div>
    </${Form}>
  </${Dialog}>`;
}

/** A read dialog's buttons: Close, and for a waiting one Reject and Approve (Applications, Token requests). */
export function DecisionButtons({ item, onApprove, onReject, onClose }) {
  return html`<div class="actions actions-end">
    <button type="button" onClick=${onClose}>Close</button>
    ${item.status === "waiting" ? html`
      <button type="button" class="danger" onClick=${() => onReject(item)}>Reject</button>
      <button type="button" class="primary" onClick=${() => onApprove(item)}>Approve</button>` : null}
  </div>`;
}

/** A row's menu: read it, and for a waiting one Approve and Reject. */
export function decisionItems(item, readLabel, { onRead, onApprove, onReject }) {
  const waiting = item.status === "waiting";
  return [
    { label: readLabel, onSelect: () => onRead(item) },
    waiting && { label: "Approve", onSelect: () => onApprove(item) },
    waiting && { label: "Reject", onSelect: () => onReject(item), danger: true },
  ].filter(Boolean);
}

/** A tab's list of things to decide, read from `path` (its `field`), and what a decision leaves: the dialog
 * closes, the list is read again, and the line that says what happened (`statusRef`) takes the focus. */
export function useDecisionList(path, field) {
  const [items, setItems] = useState(null);
  const [failed, setFailed] = useState(null);
  const [dialog, setDialog] = useState(null); // {kind, item}
  const [done, setDone] = useState("");
  const statusRef = useRef(null);
  const load = () => api(path)
    .then((answer) => { setItems(answer[field]); setFailed(null); })
    .catch((failure) => setFailed(failure.message));
  useEffect(() => { load(); }, []);
  function finish(message) {
    setDialog(null);
    setDone(message);
    load();
    requestAnimationFrame(() => statusRef.current?.focus());
  }
  return { items, failed, dialog, setDialog, done, statusRef, finish };
}
