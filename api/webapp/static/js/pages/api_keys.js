// API Keys: make, rename, pause, resume, and revoke keys.
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { docs } from "../config.js";
import { Dialog } from "../components/dialog.js";
import { ConfirmDialog } from "../components/confirm_dialog.js";
import { Field, FormError, splitError } from "../components/field.js";
import { Form } from "../components/form.js";
import { lastUsed, number, when } from "../components/format.js";
import { Link } from "../components/link.js";
import { Menu } from "../components/menu.js";
import { PageHeader } from "../notice.js";
import { setLeaveGuard } from "../router.js";

const REFRESH_MS = 60000;
const AT_LIMIT = "You have 10 API keys, the most that a User may have. Delete one to make another.";
const NOT_COPIED = "You did not copy the key. The App shows it only this once.";

function useKeys() {
  const [state, setState] = useState({ keys: null, room: true, max: 10, failed: false });
  const load = async () => {
    try {
      const answer = await api("account/keys");
      setState({ keys: answer.data, room: answer.has_more_room, max: answer.max_keys, failed: false });
    } catch (failure) {
      if (failure.name !== "AbortError") setState((old) => ({ ...old, failed: true }));
    }
  };
  useEffect(() => {
    load();
    const timer = setInterval(load, REFRESH_MS);
    return () => clearInterval(timer);
  }, []);
  return [state, load, (key) => setState((old) => ({ ...old, keys: old.keys.map((k) => (k.id === key.id ? key : k)) }))];
}

function NameDialog({ open, title, button, initial, onSave, onClose }) {
  const [name, setName] = useState(initial || "");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  useLayoutEffect(() => { if (open) { setName(initial || ""); setError(null); } }, [open]);
  async function submit(event) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await onSave(name.trim());
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }
  const errors = splitError(error, ["name"]);
  return html`<${Dialog} open=${open} title=${title} onCancel=${onClose}>
    <${Form} onSubmit=${submit}>
      <${Field} label="Name" value=${name} onInput=${setName} maxlength="32" required autocomplete="off"
        hint="Up to 32 characters, such as laptop." error=${errors.field.name} />
      <${FormError} message=${errors.form} />
      <div class="actions actions-end">
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary" disabled=${busy || !name.trim()}>${button}</button>
      </div>
    </${Form}>
  </${Dialog}>`;
}

function CopyKeyDialog({ secret, onClose }) {
  const [copied, setCopied] = useState(false);
  const [manual, setManual] = useState(false);
  const [asking, setAsking] = useState(false);
  const input = useRef(null);
  const copiedRef = useRef(false);
  useLayoutEffect(() => {
    if (!secret) return;
    setCopied(false); setManual(false); setAsking(false);
    copiedRef.current = false;
    // Closing or reloading the tab asks too, while the key is not copied.
    const unload = (event) => {
      if (copiedRef.current) return;
      event.preventDefault();
      event.returnValue = "";
    };
    window.addEventListener("beforeunload", unload);
    const unguard = setLeaveGuard(() => (copiedRef.current ? null : NOT_COPIED));
    return () => { window.removeEventListener("beforeunload", unload); unguard(); };
  }, [secret]);
  async function copy() {
    try {
      await navigator.clipboard.writeText(secret);
      copiedRef.current = true;
      setCopied(true);
      setAsking(false);
    } catch {
      setManual(true);
      select();
    }
  }
  function select() {
    const field = input.current;
    if (field) { field.focus(); field.select(); }
  }
  const done = () => (copied ? onClose() : setAsking(true));
  return html`<${Dialog} open=${Boolean(secret)} title="Copy your key" onCancel=${done} class="dialog-key">
    <p>The App shows the key only this once, because the API keeps only a hash of it.</p>
    <div class="field">
      <label for="new-key">Your new key</label>
      <div class="key-row">
        <textarea id="new-key" ref=${input} class="mono" rows="3" readonly value=${secret || ""}
          onFocus=${select} onClick=${select}></textarea>
        <button type="button" class="primary" onClick=${copy}>Copy</button>
      </div>
    </div>
    <p class="status-line" role="status">${copied ? "Copied." : manual ? "The browser did not let the App copy the key. It is selected: copy it by hand." : ""}</p>
    <p><a href=${docs("/retries#set-the-client-for-long-requests")} target="_blank" rel="noopener">Set the client for long requests</a></p>
    ${asking ? html`<div class="confirm" role="alert">
      <p>${NOT_COPIED}</p>
      <div class="actions actions-end">
        <button type="button" onClick=${() => { setAsking(false); select(); }}>Go back to the key</button>
        <button type="button" class="danger" onClick=${onClose}>Close without copying</button>
      </div>
    </div>` : html`<div class="actions actions-end"><button type="button" class="primary" onClick=${done}>Done</button></div>`}
  </${Dialog}>`;
}

function RevokeDialog({ keyRow, onRevoke, onClose }) {
  return html`<${ConfirmDialog} subject=${keyRow} title=${keyRow ? `Revoke ${keyRow.name}?` : "Revoke"}
    text="Requests with the key get 401 at once. You cannot undo a revoke." action="Revoke key"
    onConfirm=${onRevoke} onClose=${onClose} />`;
}

function KeyRow({ item, onRename, onRevoke, onToggle }) {
  const paused = item.status === "paused";
  const items = [
    { label: "Rename", onSelect: () => onRename(item) },
    { label: paused ? "Resume" : "Pause", onSelect: () => onToggle(item) },
    { label: "View usage", to: `/usage?key=${encodeURIComponent(item.id)}` },
    { label: "Revoke", onSelect: () => onRevoke(item), danger: true },
  ];
  return html`<tr>
    <td class="key-name"><span class="cut" title=${item.name}>${item.name}</span><span class="mono prefix">${item.prefix}…</span></td>
    <td><span class=${`badge badge-${item.status}`}>${paused ? "Paused" : "Active"}</span></td>
    <td class="num"><${Link} to=${`/usage?key=${encodeURIComponent(item.id)}`}>${number(item.tokens_this_month)}</${Link}></td>
    <td class="num wide">${item.budget_left === null || item.budget_left === undefined ? "—" : number(item.budget_left)}</td>
    <td class="wide">${lastUsed(item.last_used_at)}</td>
    <td class="wide">${when(item.created_at)}</td>
    <td class="row-menu"><${Menu} label=${html`<span aria-hidden="true">⋯</span>`} ariaLabel=${`Actions of ${item.name}`} items=${items} floating=${true} /></td>
  </tr>`;
}

export default function ApiKeys() {
  const [state, reload, replace] = useKeys();
  const [dialog, setDialog] = useState(null); // {kind: "new"|"rename"|"revoke", key}
  const [secret, setSecret] = useState(null);
  const [rowError, setRowError] = useState(null);

  async function create(name) {
    const made = await api("account/keys", { method: "POST", body: { name } });
    setDialog(null);
    setSecret(made.key);
    reload();
  }
  async function rename(name) {
    replace(await api(`account/keys/${dialog.key.id}/rename`, { method: "POST", body: { name } }));
    setDialog(null);
  }
  async function toggle(item) {
    setRowError(null);
    try {
      replace(await api(`account/keys/${item.id}/${item.status === "paused" ? "resume" : "pause"}`, { method: "POST" }));
    } catch (failure) {
      setRowError(failure.message);
    }
  }
  async function revoke(item) {
    await api(`account/keys/${item.id}/revoke`, { method: "POST" });
    setDialog(null);
    reload();
  }

  const keys = state.keys;
  const newKey = html`<button type="button" class="primary" disabled=${!state.room}
    onClick=${() => setDialog({ kind: "new" })}>New key</button>`;
  let body;
  if (keys === null) {
    body = state.failed ? html`<p class="form-error" role="alert">Could not refresh.</p>` : html`<p role="status">Loading…</p>`;
  } else if (keys.length === 0) {
    body = html`<div class="empty"><h2>No API keys yet</h2><p>Make a key to send requests to the API.</p>${newKey}</div>`;
  } else {
    body = html`<div class="toolbar">${newKey}</div>
      <div class="table-scroll" tabindex="0" role="region" aria-label="Your API keys">
        <table class="table keys-table">
          <caption class="visually-hidden">Your API keys</caption>
          <thead><tr>
            <th scope="col">Name</th><th scope="col">Status</th><th scope="col" class="num">This month</th>
            <th scope="col" class="num wide">Budget</th><th scope="col" class="wide">Last used</th>
            <th scope="col" class="wide">Created</th><th scope="col"><span class="visually-hidden">Actions</span></th>
          </tr></thead>
          <tbody>${keys.map((item) => html`<${KeyRow} key=${item.id} item=${item}
            onRename=${(key) => setDialog({ kind: "rename", key })} onRevoke=${(key) => setDialog({ kind: "revoke", key })}
            onToggle=${toggle} />`)}</tbody>
        </table>
      </div>
      ${state.room ? null : html`<p class="note">${AT_LIMIT}</p>`}
      <${FormError} message=${rowError} />
      ${state.failed ? html`<p class="form-error" role="status">Could not refresh.</p>` : null}`;
  }
  return html`<${PageHeader} title="API Keys" />
    <section class="page-body">${body}</section>
    <${NameDialog} open=${dialog?.kind === "new"} title="New key" button="Create key" onSave=${create} onClose=${() => setDialog(null)} />
    <${NameDialog} open=${dialog?.kind === "rename"} title=${dialog?.kind === "rename" ? `Rename ${dialog.key.name}` : "Rename"}
      button="Rename" initial=${dialog?.key?.name} onSave=${rename} onClose=${() => setDialog(null)} />
    <${RevokeDialog} keyRow=${dialog?.kind === "revoke" ? dialog.key : null} onRevoke=${revoke} onClose=${() => setDialog(null)} />
    <${CopyKeyDialog} secret=${secret} onClose=${() => setSecret(null)} />`;
}
