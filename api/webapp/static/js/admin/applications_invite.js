// Make Invites (spec: "Get access", "Group Users with tags"): an invite link for an email, with a Tag that each
// new User of the Invite gets and Tokens for their Budget. The link works once, for 7 days, and the App shows
// it only in the answer, so the dialog keeps it in view with Copy until the admin closes it.
import { useLayoutEffect, useRef, useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { Dialog } from "../components/dialog.js";
import { Field, FormError, splitError } from "../components/field.js";
import { Form } from "../components/form.js";
import { useCopy } from "../components/copy.js";
import { compact, day } from "../components/format.js";

const FIELDS = ["email", "tag", "tokens"];
const EMPTY = { email: "", tag: "", tokens: "" };

/** A tag as the App writes what an admin types: `Hiring 2026 08` is `hiring-2026-08` (the API's own rule). */
export function writeTag(text) {
  return String(text || "").trim().toLowerCase().replace(/[\s_]+/g, "-");
}

function Made({ invite, onAnother, onClose }) {
  const [copy, manualCopy, copied] = useCopy();
  const link = useRef(null);
  // The form that had the focus is gone: the link takes it, selected for a copy by hand.
  useLayoutEffect(() => link.current?.focus(), []);
  const facts = [["Email", invite.email], ["Tag", invite.tag || "None"],
    ["Tokens", invite.tokens ? compact(invite.tokens) : "None"], ["Works until", day(invite.expires_at)]];
  return html`<p role="status">The Invite for ${invite.email} is made. Send them the link: it works once, for 7 days,
      and the App shows it only now.</p>
    <div class="field">
      <label for="invite-link">Invite link</label>
      <div class="key-row">
        <textarea id="invite-link" ref=${link} class="mono" rows="2" readonly value=${invite.link}
          onFocus=${(event) => event.currentTarget.select()}></textarea>
        <button type="button" class="primary" onClick=${() => copy(invite.link, "the link")}>Copy</button>
      </div>
    </div>
    <p class="status-line" role="status">${copied}</p>
    <dl class="facts invite-facts">${facts.map(([label, value]) => html`<dt>${label}</dt><dd>${value}</dd>`)}</dl>
    <div class="actions actions-end">
      <button type="button" onClick=${onAnother}>Make another</button>
      <button type="button" class="primary" onClick=${onClose}>Done</button>
    </div>
    ${manualCopy}`;
}

/** `open`: shown; `onMade(invite)`: after each Invite (the tab says so beside its button). */
export function InviteDialog({ open, onClose, onMade }) {
  const [form, setForm] = useState(EMPTY);
  const [made, setMade] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  useLayoutEffect(() => {
    if (open) { setForm(EMPTY); setMade(null); setError(null); }
  }, [open]);
  const set = (name) => (value) => setForm((old) => ({ ...old, [name]: value }));

  async function submit() {
    setError(null);
    const tag = writeTag(form.tag);
    setForm((old) => ({ ...old, tag }));
    setBusy(true);
    try {
      const body = { email: form.email.trim() };
      if (tag) body.tag = tag;
      if (form.tokens.trim()) body.tokens = form.tokens.trim();
      const invite = await api("v1/admin/invites", { method: "POST", body });
      setMade(invite);
      if (onMade) onMade(invite);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }
  // Another Invite of the same group: the Tag and the Tokens stay.
  const another = () => { setForm((old) => ({ ...old, email: "" })); setMade(null); setError(null); };
  const errors = splitError(error, FIELDS);
  const written = writeTag(form.tag);
  return html`<${Dialog} open=${open} title="Make Invites" onCancel=${onClose} class="dialog-invite">
    ${made ? html`<${Made} invite=${made} onAnother=${another} onClose=${onClose} />` : html`<${Form} onSubmit=${submit}>
      <p>An invite link opens the Apply form with the email filled in. <strong>Set up my account</strong> approves
        them at once. Each link works once, for 7 days.</p>
      <${Field} label="Email" type="email" autocomplete="off" value=${form.email} onInput=${set("email")}
        error=${errors.field.email} />
      <${Field} label="Tag" optional autocomplete="off" value=${form.tag} onInput=${set("tag")}
        onBlur=${() => setForm((old) => ({ ...old, tag: writeTag(old.tag) }))} error=${errors.field.tag}
        hint=${written && written !== form.tag ? `Written as ${written}.`
          : "Lowercase letters, digits, and dashes, such as hiring-2026-08. Each new User of the Invite gets it."} />
      <${Field} label="Tokens" optional autocomplete="off" value=${form.tokens} onInput=${set("tokens")}
        hint="Tokens for their Budget, such as 50K or 2.5M." error=${errors.field.tokens} />
      <${FormError} message=${errors.form} />
      <div class="actions actions-end">
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary" disabled=${busy}>Make Invite</button>
      </div>
    </${Form}>`}
  </${Dialog}>`;
}
