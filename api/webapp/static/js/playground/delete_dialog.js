// Delete a Run, after "Delete run" (spec: "Find your Runs again").
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { Dialog } from "../components/dialog.js";
import { FormError } from "../components/field.js";

export function DeleteDialog({ run, onDelete, onClose }) {
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => setError(null), [run]);
  async function remove(event) {
    event.preventDefault();
    setBusy(true);
    try {
      await onDelete(run);
    } catch (failure) {
      setError(failure.message);
    } finally {
      setBusy(false);
    }
  }
  return html`<${Dialog} open=${Boolean(run)} title=${run ? `Delete run ${run.number}?` : "Delete run"} onCancel=${onClose}>
    <form onSubmit=${remove}>
      <p>Its text, tokens, and Activations go. You cannot undo it.</p>
      <${FormError} message=${error} />
      <div class="actions actions-end">
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="danger" disabled=${busy}>Delete run</button>
      </div>
    </form>
  </${Dialog}>`;
}
