// A dialog that asks before an action that cannot be undone (Revoke key, Delete run, Delete Loom):
// what goes, then Cancel and the action's own button. A refusal shows in the dialog, which stays
// open; the focus moves to it (Form).
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { Dialog } from "./dialog.js";
import { FormError } from "./field.js";
import { Form } from "./form.js";

/** `subject`: what the action acts on (null: closed); `onConfirm(subject)` may throw its refusal. */
export function ConfirmDialog({ subject, title, text, action, onConfirm, onClose }) {
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => setError(null), [subject]);
  async function confirm() {
    setBusy(true);
    setError(null);
    try {
      await onConfirm(subject);
    } catch (failure) {
      setError(failure.message);
    } finally {
      setBusy(false);
    }
  }
  return html`<${Dialog} open=${Boolean(subject)} title=${title} onCancel=${onClose}>
    <${Form} onSubmit=${confirm}>
      <p>${text}</p>
      <${FormError} message=${error} />
      <div class="actions actions-end">
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="danger" disabled=${busy}>${action}</button>
      </div>
    </${Form}>
  </${Dialog}>`;
}
