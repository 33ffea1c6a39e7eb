// Notes on A User's page: what the team keeps on a User, newest first, each with the admin who
// wrote it and when; a form adds one, and each can be deleted after a confirmation. Only admins read them.
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { ConfirmDialog } from "../components/confirm_dialog.js";
import { Field, FormError, splitError } from "../components/field.js";
import { Form } from "../components/form.js";
import { stamp } from "../components/format.js";
import { UserPart } from "./user_page_parts.js";

const NOTE_MAX = 5000; // as the API keeps (ledger/accounts/user_notes.py)

export function Notes({ userId }) {
  const [notes, setNotes] = useState(null);
  const [failed, setFailed] = useState(null);
  const [text, setText] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [added, setAdded] = useState("");
  const [deleting, setDeleting] = useState(null);
  const path = `v1/admin/users/${userId}/notes`;
  useEffect(() => {
    api(path).then((answer) => { setNotes(answer.notes); setFailed(null); }).catch((failure) => setFailed(failure.message));
  }, [path]);
  async function add() {
    setBusy(true);
    setError(null);
    setAdded("");
    try {
      const answer = await api(path, { method: "POST", body: { text } });
      setNotes(answer.notes);
      setText("");
      setAdded("Note added.");
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }
  async function remove(note) {
    const answer = await api(`${path}/${note.id}`, { method: "DELETE" });
    setNotes(answer.notes);
    setDeleting(null);
    setAdded("Note deleted.");
  }
  const errors = splitError(error, ["text"]);
  return html`<${UserPart} id="user-notes" title="Notes">
    ${failed ? html`<p class="form-error" role="alert">${failed}</p>` : null}
    ${notes === null ? (failed ? null : html`<p role="status">Loading…</p>`) : notes.length ? html`<ul class="user-notes" aria-label="Notes on this User">
      ${notes.map((note) => html`<li class="user-note">
        <p class="user-note-text">${note.text}</p>
        <p class="user-note-by">${note.author.email || note.author.name}, ${stamp(note.created_at)} UTC
          <button type="button" class="link-button" aria-label=${`Delete the note of ${stamp(note.created_at)}`}
            onClick=${() => setDeleting(note)}>Delete</button></p>
      </li>`)}</ul>` : html`<p class="muted">No notes yet.</p>`}
    <${Form} onSubmit=${add} class="user-note-form">
      <${Field} label="New note" multiline value=${text} onInput=${(value) => { setText(value); setAdded(""); }}
        maxLength=${NOTE_MAX} hint="Only admins read the notes." error=${errors.field.text} />
      <${FormError} message=${errors.form} />
      <div class="actions">
        <button type="submit" disabled=${busy || !text.trim()}>Add note</button>
        <span role="status" class="success-text">${added}</span>
      </div>
    </${Form}>
    <${ConfirmDialog} subject=${deleting} title="Delete this note?" action="Delete note"
      text=${deleting ? `“${deleting.text.length > 120 ? `${deleting.text.slice(0, 120)}…` : deleting.text}” goes for every admin. You cannot undo it.` : ""}
      onConfirm=${remove} onClose=${() => setDeleting(null)} />
  </${UserPart}>`;
}
