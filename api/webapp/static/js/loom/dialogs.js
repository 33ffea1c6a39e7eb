// The Loom's own dialogs (spec: "Open or start a Loom"): Rename this Loom (an empty Title leaves
// the Loom untitled, so that its next Branch names it), and Delete Loom after a confirmation.
import { useState } from "preact/hooks";
import { html } from "../html.js";
import { Dialog } from "../components/dialog.js";
import { ConfirmDialog } from "../components/confirm_dialog.js";
import { Field, FormError } from "../components/field.js";
import { titleOf } from "./looms_list.js";

export function RenameDialog({ loom, onSave, onClose }) {
  // The form exists only while the dialog is open, so each opening starts from the Loom's title.
  return html`<${Dialog} open=${Boolean(loom)} title="Rename this Loom" onCancel=${onClose}>
    ${loom ? html`<${RenameForm} loom=${loom} onSave=${onSave} onClose=${onClose} />` : null}
  </${Dialog}>`;
}

function RenameForm({ loom, onSave, onClose }) {
  const [title, setTitle] = useState(() => loom.title || "");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  async function save(event) {
    event.preventDefault();
    setBusy(true);
    try {
      await onSave(loom, title);
    } catch (failure) {
      setError(failure.message);
      setBusy(false);
    }
  }
  return html`<form onSubmit=${save}>
    <${Field} label="Title" value=${title} onInput=${setTitle} maxlength="120" autocomplete="off"
      hint="An empty title leaves the Loom untitled, so its next Branch names it." />
    <${FormError} message=${error} />
    <div class="actions actions-end">
      <button type="button" onClick=${onClose}>Cancel</button>
      <button type="submit" class="primary" disabled=${busy}>Save</button>
    </div>
  </form>`;
}

export function DeleteLoomDialog({ loom, onDelete, onClose }) {
  return html`<${ConfirmDialog} subject=${loom} title=${`Delete ${loom ? `“${titleOf(loom)}”` : "this Loom"}?`}
    text="The Loom goes, with its prompt and every Node. You cannot undo it." action="Delete Loom"
    onConfirm=${onDelete} onClose=${onClose} />`;
}
