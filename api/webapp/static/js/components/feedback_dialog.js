// Send feedback (Support, then Feedback): what it is about, the note, the page's address, screenshots
// (chosen, dropped or pasted), and the details that go with it unless the note is anonymous: the account,
// the browser's name, and the App's recent errors and request ids, shown before they are sent.
// Screenshots are checked here as the API checks them (their type by their first bytes, 2 MB, at most 5),
// so a wrong file is named at once; the API checks again.
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "../html.js";
import { api, here, recentErrors } from "../api.js";
import { Dialog } from "./dialog.js";
import { Checkbox, Field, FormError, splitError } from "./field.js";
import { Form } from "./form.js";
import { number } from "./format.js";

const KINDS = [["bug", "Bug"], ["feature_request", "Feature request"], ["general", "General"]];
const NOTE_MAX = 5000;
const SHOTS_MAX = 5;
const SHOT_BYTES_MAX = 2 * 1024 * 1024;
const THANKS = "Thanks, your note reached the team.";
const ANONYMOUS = "Send anonymously, without my account or the details below";
const FIELDS = ["kind", "note", "screenshots"];

/** The image type of the file's first bytes (as the API reads them), or null. */
async function imageType(file) {
  const bytes = new Uint8Array(await file.slice(0, 12).arrayBuffer());
  const starts = (...magic) => magic.every((value, index) => bytes[index] === value);
  const text = (from, to) => String.fromCharCode(...bytes.slice(from, to));
  if (starts(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return "PNG";
  if (starts(0xff, 0xd8, 0xff)) return "JPEG";
  if (text(0, 6) === "GIF87a" || text(0, 6) === "GIF89a") return "GIF";
  if (text(0, 4) === "RIFF" && text(8, 12) === "WEBP") return "WebP";
  return null;
}

async function base64(file) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  let binary = "";
  for (let at = 0; at < bytes.length; at += 0x8000) binary += String.fromCharCode(...bytes.subarray(at, at + 0x8000));
  return btoa(binary);
}

function size(bytes) {
  return bytes >= 1024 * 1024 ? `${(bytes / (1024 * 1024)).toFixed(1)} MB` : `${Math.max(1, Math.round(bytes / 1024))} KB`;
}

/** The files that can join the note, and what is wrong with the others (one message). */
async function checked(files, have) {
  const taken = [];
  const refused = [];
  for (const file of files) {
    const name = file.name || "pasted image";
    if (have + taken.length >= SHOTS_MAX) { refused.push(`A note has at most ${SHOTS_MAX} screenshots.`); break; }
    if (file.size > SHOT_BYTES_MAX) { refused.push(`${name} is ${size(file.size)}: each screenshot must be 2 MB or less.`); continue; }
    if (!(await imageType(file))) { refused.push(`${name} is not a PNG, JPEG, GIF or WebP image.`); continue; }
    taken.push({ file, name, size: file.size });
  }
  return { taken, refused: refused.join(" ") || null };
}

function Screenshots({ shots, setShots, error, setError }) {
  const input = useRef(null);
  const [over, setOver] = useState(false);
  async function add(files) {
    const { taken, refused } = await checked([...files], shots.length);
    setShots((now) => [...now, ...taken].slice(0, SHOTS_MAX));
    setError(refused);
  }
  return html`<div class=${`field feedback-shots${error ? " field-invalid" : ""}`}>
    <span class="field-label" id="feedback-shots-label">Screenshots <span class="optional">(optional)</span></span>
    <div class=${`feedback-drop${over ? " feedback-drop-over" : ""}`} onDragOver=${(event) => { event.preventDefault(); setOver(true); }}
      onDragLeave=${() => setOver(false)} onDrop=${() => setOver(false)} data-testid="feedback-drop">
      <button type="button" onClick=${() => input.current.click()} aria-describedby="feedback-shots-hint">Choose screenshots</button>
      <p class="hint" id="feedback-shots-hint">Or drop them here, or paste them. PNG, JPEG, GIF or WebP, each 2 MB or less; at most 5.</p>
      <input ref=${input} type="file" accept="image/png,image/jpeg,image/gif,image/webp" multiple hidden
        aria-label="Choose screenshots" onChange=${(event) => { add(event.currentTarget.files); event.currentTarget.value = ""; }} />
    </div>
    ${shots.length ? html`<ul class="feedback-shot-list" aria-labelledby="feedback-shots-label">
      ${shots.map((shot, index) => html`<li key=${index}>
        <span class="feedback-shot-name">${shot.name}</span> <span class="muted">${size(shot.size)}</span>
        <button type="button" class="link-button" aria-label=${`Remove ${shot.name}`}
          onClick=${() => setShots((now) => now.filter((_, at) => at !== index))}>Remove</button>
      </li>`)}
    </ul>` : null}
    ${error ? html`<p class="field-error" role="alert">${error}</p>` : null}
  </div>`;
}

function Details({ user, errors, anonymous }) {
  if (anonymous) {
    return html`<p class="hint feedback-details">This note goes without your account, your browser's name, and the App's
      recent errors and request ids.</p>`;
  }
  return html`<section class="feedback-details" aria-labelledby="feedback-details-title">
    <h3 id="feedback-details-title">Details</h3>
    <dl class="facts">
      <dt>Your account</dt><dd>${user.email}</dd>
      <dt>Your browser</dt><dd class="feedback-browser">${navigator.userAgent}</dd>
    </dl>
    <h4 class="feedback-errors-title">The App's recent errors and request ids</h4>
    ${errors.length
      ? html`<ul class="feedback-errors">${errors.map((error, index) => html`<li key=${index}>
          <span class="feedback-error-status">${error.status || "No answer"}${error.code ? ` ${error.code}` : ""}</span>
          ${" "}${error.message}
          ${error.request_id ? html`<br /><span class="muted">Request id <code>${error.request_id}</code></span>` : null}
        </li>`)}</ul>`
      : html`<p class="hint">No errors since this tab opened the App.</p>`}
  </section>`;
}

function FeedbackForm({ user, onClose }) {
  const [kind, setKind] = useState("");
  const [note, setNote] = useState("");
  const [shots, setShots] = useState([]);
  const [shotsError, setShotsError] = useState(null);
  const [anonymous, setAnonymous] = useState(false);
  const [errors, setErrors] = useState({});
  const [formError, setFormError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [sent, setSent] = useState(false);
  const page = useRef(here()).current;
  const recent = useRef(recentErrors()).current;
  const box = useRef(null);

  // A pasted image joins the screenshots wherever the focus is in the dialog, and so does a file dropped anywhere
  // on it: a drop beside the field must not make the browser open the file, and lose the note.
  useEffect(() => {
    const dialog = box.current && box.current.closest("dialog");
    if (!dialog) return undefined;
    const add = async (event, list) => {
      const files = [...(list || [])];
      if (!files.length) return;
      event.preventDefault();
      const { taken, refused } = await checked(files, shots.length);
      setShots((now) => [...now, ...taken].slice(0, SHOTS_MAX));
      setShotsError(refused);
    };
    const paste = (event) => add(event, event.clipboardData && event.clipboardData.files);
    const drop = (event) => add(event, event.dataTransfer && event.dataTransfer.files);
    const over = (event) => { if (event.dataTransfer && [...event.dataTransfer.types].includes("Files")) event.preventDefault(); };
    dialog.addEventListener("paste", paste);
    dialog.addEventListener("dragover", over);
    dialog.addEventListener("drop", drop);
    return () => {
      dialog.removeEventListener("paste", paste);
      dialog.removeEventListener("dragover", over);
      dialog.removeEventListener("drop", drop);
    };
  }, [shots.length]);

  async function submit() {
    const found = {};
    if (!kind) found.kind = "Choose what the note is about: Bug, Feature request or General.";
    if (!note.trim()) found.note = "Write your note.";
    else if (note.trim().length > NOTE_MAX) found.note = `Write at most 5,000 characters in your note; this has ${number(note.trim().length)}.`;
    setErrors(found);
    setFormError(null);
    if (Object.keys(found).length) return;
    setBusy(true);
    try {
      const screenshots = await Promise.all(shots.map(async (shot) => ({ name: shot.name, data: await base64(shot.file) })));
      await api("account/feedback", { method: "POST", body: {
        kind, note: note.trim(), page, anonymous, screenshots, ...(anonymous ? {} : { errors: recent }) } });
      setSent(true);
    } catch (failure) {
      const split = splitError(failure, FIELDS);
      if (split.field.screenshots) setShotsError(split.field.screenshots);
      setErrors({ kind: split.field.kind, note: split.field.note });
      setFormError(split.form);
    } finally {
      setBusy(false);
    }
  }

  if (sent) {
    return html`<div ref=${box}>
      <p class="success" role="status">${THANKS}</p>
      <div class="actions actions-end"><button type="button" class="primary" autofocus onClick=${onClose}>Close</button></div>
    </div>`;
  }
  const length = note.trim().length;
  return html`<div ref=${box}><${Form} onSubmit=${submit} class="feedback-form">
    <fieldset class=${`feedback-kinds${errors.kind ? " field-invalid" : ""}`} aria-describedby=${errors.kind ? "feedback-kind-error" : undefined}>
      <legend>What is it about?</legend>
      ${KINDS.map(([value, label]) => html`<label class="feedback-kind" key=${value}>
        <input type="radio" name="feedback-kind" value=${value} checked=${kind === value}
          aria-invalid=${errors.kind ? "true" : undefined} onChange=${() => { setKind(value); setErrors((now) => ({ ...now, kind: null })); }} /> ${label}
      </label>`)}
      ${errors.kind ? html`<p class="field-error" id="feedback-kind-error">${errors.kind}</p>` : null}
    </fieldset>
    <${Field} label="Your note" multiline rows="5" value=${note} onInput=${(value) => { setNote(value); if (errors.note) setErrors((now) => ({ ...now, note: null })); }}
      error=${errors.note}
      hint=${`Up to 5,000 characters (${number(length)} now). Do not paste a prompt or a Completion that you want to keep private.`} />
    <p class="feedback-page"><span class="field-label">The page</span> <code>${page}</code></p>
    <${Screenshots} shots=${shots} setShots=${setShots} error=${shotsError} setError=${setShotsError} />
    <${Checkbox} label=${ANONYMOUS} checked=${anonymous} onChange=${setAnonymous} />
    <${Details} user=${user} errors=${recent} anonymous=${anonymous} />
    <${FormError} message=${formError} />
    <div class="actions actions-end">
      <button type="button" onClick=${onClose}>Cancel</button>
      <button type="submit" class="primary" disabled=${busy}>${busy ? "Sending…" : "Send"}</button>
    </div>
  </${Form}></div>`;
}

/** The Send feedback dialog; `open` shows it, `onClose` closes it (Escape and Cancel too). */
export function FeedbackDialog({ open, user, onClose }) {
  return html`<${Dialog} open=${open} title="Send feedback" class="feedback-dialog" onCancel=${onClose}>
    <${FeedbackForm} user=${user} onClose=${onClose} />
  </${Dialog}>`;
}
