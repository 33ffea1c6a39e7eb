// Delete a Run, after "Delete run" (spec: "Find your Runs again").
import { html } from "../html.js";
import { ConfirmDialog } from "../components/confirm_dialog.js";

export function DeleteDialog({ run, onDelete, onClose }) {
  return html`<${ConfirmDialog} subject=${run} title=${run ? `Delete run ${run.number}?` : "Delete run"}
    text="Its text, tokens, and Activations go. You cannot undo it." action="Delete run"
    onConfirm=${onDelete} onClose=${onClose} />`;
}
