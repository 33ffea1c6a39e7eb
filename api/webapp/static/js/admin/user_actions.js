// The actions on Users that the Users tab's Selected Users and a User's page share (spec: "Act on many Users
// at once"): Suspend, Restore, Add tag, Remove tag, Set allowance and Delete, each through one dialog that
// says what it does, counts the Users that it leaves out and why, asks for what it needs (a tag, an
// allowance, the typed words of a Delete), then lists each User that the API refused with its reason.
//
//   <UserActions users=${[user]} me=${me} onDone=${reload} label="Actions" />  a menu of the six actions
//   <UserActionDialog action="suspend" users=${users} me=${me} onClose=... onDone=... />  one action's dialog
//   runUserAction("suspend", ids, { tag, tokens })  the route itself: { changed: [ids], refused: [...] }
//
// On a User's own row (their page: `ownRow`), an admin is not left out ("change an admin from their own
// row"): each action takes the User's own route (POST v1/admin/users/<id>/suspend, .../delete, ...).
//
// `users` are rows as GET v1/admin/users lists them (or a User's page: id, name, email, role, standing,
// tags, deleted_at); `me` is the signed-in admin ({ id }).
import { useLayoutEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { Dialog } from "../components/dialog.js";
import { Field, FormError, splitError } from "../components/field.js";
import { Form } from "../components/form.js";
import { Menu } from "../components/menu.js";

export const ACTIONS = [
  ["suspend", "Suspend"], ["restore", "Restore"], ["add_tag", "Add tag"], ["remove_tag", "Remove tag"],
  ["set_allowance", "Set allowance"], ["delete", "Delete"],
];
const LABEL = Object.fromEntries(ACTIONS);
const TAG_MAX = 32;

/** "1 User", "3 Users". */
export function users(count) {
  return `${count} ${count === 1 ? "User" : "Users"}`;
}

/** A tag in its one form, as the API writes it: `Hiring 2026 08` is `hiring-2026-08`. */
export function tagForm(text) {
  return String(text || "").trim().toLowerCase().replace(/[\s_]+/g, "-");
}

export function validTag(tag) {
  return tag.length > 0 && tag.length <= TAG_MAX && /^[a-z0-9-]+$/.test(tag);
}

/** The words that a Delete of `count` Users needs typed: `delete 3 Users`, `delete 1 User`. */
export function deleteWords(count) {
  return `delete ${users(count)}`;
}

/** Whether the User may be selected at all: never your own row, never a deleted User. */
export function selectable(user, me) {
  return Boolean(user) && user.id !== me?.id && !user.deleted_at;
}

// Why an action leaves a User out, as a group the dialog counts ("Leaves out 2 admins ..."); null: it suits.
// The API holds the same rules (domain/operations/user_bulk.py) and answers a refusal for each User it leaves out.
function leftOut(action, user, me, tag, ownRow) {
  if (user.id === me?.id) return "own";
  if (user.deleted_at) return "deleted";
  if ((action === "suspend" || action === "delete") && user.role === "admin" && !ownRow) return "admin";
  if (action === "suspend" && user.standing === "suspended") return "suspended";
  if (action === "restore" && user.standing !== "suspended") return "active";
  if (action === "add_tag" && tag && (user.tags || []).includes(tag)) return "tagged";
  if (action === "remove_tag" && tag && !(user.tags || []).includes(tag)) return "untagged";
  return null;
}

const LEFT_OUT = {
  own: (n) => `Leaves out your own account (${n}): ask another admin to change it.`,
  deleted: (n) => `Leaves out ${n} deleted ${n === 1 ? "User" : "Users"}.`,
  admin: (n) => `Leaves out ${n} ${n === 1 ? "admin" : "admins"}: change an admin from their own row.`,
  suspended: (n) => `Leaves out ${users(n)} not suited: suspended already.`,
  active: (n) => `Leaves out ${users(n)} not suited: not suspended.`,
  tagged: (n, tag) => `Leaves out ${users(n)} not suited: tagged ${tag} already.`,
  untagged: (n, tag) => `Leaves out ${users(n)} not suited: without the tag ${tag}.`,
};

/** The Users that `action` suits, and a sentence for each group that it leaves out. */
export function sortOut(action, chosen, me, tag = "", ownRow = false) {
  const suited = [];
  const groups = {};
  for (const user of chosen) {
    const why = leftOut(action, user, me, tag, ownRow);
    if (why) groups[why] = (groups[why] || 0) + 1;
    else suited.push(user);
  }
  return { suited, notes: Object.entries(groups).map(([why, n]) => LEFT_OUT[why](n, tag)) };
}

/** POST v1/admin/users/bulk: `tag` for the tag actions, `tokens` (a number, a text such as 50K, or null for
 * the platform's default) for Set allowance. */
export function runUserAction(action, ids, { tag, tokens } = {}) {
  const body = { action, user_ids: ids };
  if (action === "add_tag" || action === "remove_tag") body.tag = tag;
  if (action === "set_allowance") body.tokens = tokens === "" || tokens === undefined ? null : tokens;
  return api("v1/admin/users/bulk", { method: "POST", body });
}

/** One User's action through their own routes, answered as the bulk route answers. */
export async function runRowAction(action, user, { tag, tokens } = {}) {
  const path = `v1/admin/users/${user.id}`;
  const calls = {
    suspend: () => api(`${path}/suspend`, { method: "POST" }),
    restore: () => api(`${path}/restore`, { method: "POST" }),
    delete: () => api(`${path}/delete`, { method: "POST" }),
    add_tag: () => api(`${path}/tags`, { method: "POST", body: { tag } }),
    remove_tag: () => api(`${path}/tags/${encodeURIComponent(tag)}`, { method: "DELETE" }),
    set_allowance: () => api(`${path}/allowance`, { method: "POST", body: { tokens: tokens === "" || tokens === undefined ? null : tokens } }),
  };
  await calls[action]();
  return { changed: [user.id], refused: [] };
}

const WHAT = {
  suspend: (n) => `Suspend ${users(n)}. Requests with their keys get 401, their Jobs and Loom Branches wait, and they are signed out of the App until you restore them.`,
  restore: (n) => `Restore ${users(n)}. Their keys work again, their waiting work runs, and they can sign in.`,
  add_tag: (n) => `Add a tag to ${users(n)}.`,
  remove_tag: (n) => `Remove a tag from ${users(n)}.`,
  set_allowance: (n) => `Set the monthly allowance of ${users(n)}.`,
  delete: (n) => `Delete ${users(n)}. Their keys are revoked, they are signed out, and they cannot sign in again. Their usage stays in the numbers. You cannot undo a delete.`,
};
const DONE = {
  suspend: "Suspended", restore: "Restored", add_tag: "Tagged", remove_tag: "Untagged",
  set_allowance: "Set the allowance of", delete: "Deleted",
};

function Refusals({ refused }) {
  if (!refused.length) return null;
  return html`<div class="users-refusals">
    <p>The API refused ${users(refused.length)}:</p>
    <ul>${refused.map((each) => html`<li key=${each.user_id}>
      <strong>${each.name || each.user_id}</strong>${each.email ? html` <span class="muted">(${each.email})</span>` : null}:
      ${" "}${each.reason}</li>`)}</ul>
  </div>`;
}

/** One action's dialog; `action` null: closed. `onDone(answer)` after the route answered, `onClose` on
 * Cancel or Done. `ownRow`: the one User's own row (their page), where admins are not left out. */
export function UserActionDialog({ action, users: chosen, me, onClose, onDone, ownRow = false }) {
  const [tag, setTag] = useState("");
  const [tokens, setTokens] = useState("");
  const [typed, setTyped] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [answer, setAnswer] = useState(null);
  useLayoutEffect(() => {
    if (!action) return;
    setTag(""); setTokens(""); setTyped(""); setError(null); setAnswer(null);
  }, [action]);
  if (!action) return null;
  const written = tagForm(tag);
  const { suited, notes } = sortOut(action, chosen, me, written, ownRow && chosen.length === 1);
  const needsTag = action === "add_tag" || action === "remove_tag";
  const words = deleteWords(suited.length);
  const ready = suited.length > 0 && (!needsTag || validTag(written)) && (action !== "delete" || typed.trim() === words);
  async function submit() {
    if (!ready) return;
    setBusy(true);
    setError(null);
    try {
      const given = { tag: written, tokens: tokens.trim() };
      const found = ownRow && suited.length === 1
        ? await runRowAction(action, suited[0], given)
        : await runUserAction(action, suited.map((user) => user.id), given);
      setAnswer(found);
      if (onDone) onDone(found);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }
  const errors = splitError(error, ["tag", "tokens"]);
  const title = `${LABEL[action]}: ${users(chosen.length)} selected`;
  if (answer) {
    const names = answer.changed.length;
    return html`<${Dialog} open=${true} title=${title} onCancel=${onClose} class="users-action-dialog">
      <p role="status">${DONE[action]} ${users(names)}${needsTag ? ` (${written})` : ""}.</p>
      <${Refusals} refused=${answer.refused} />
      <div class="actions actions-end"><button type="button" class="primary" onClick=${onClose}>Done</button></div>
    </${Dialog}>`;
  }
  const button = action === "delete" ? `Delete ${users(suited.length)}` : `${LABEL[action]} ${users(suited.length)}`;
  return html`<${Dialog} open=${true} title=${title} onCancel=${onClose} class="users-action-dialog">
    <${Form} onSubmit=${submit}>
      <p>${suited.length ? WHAT[action](suited.length) : "The action suits none of the selected Users."}</p>
      ${notes.length ? html`<ul class="users-left-out">${notes.map((note) => html`<li>${note}</li>`)}</ul>` : null}
      ${needsTag ? html`<${Field} label="Tag" value=${tag} onInput=${setTag} maxlength="64" autocomplete="off" required
        hint=${written && written !== tag ? `Written as ${written}.` : "Lowercase letters, digits and dashes, at most 32, such as hiring-2026-08."}
        error=${errors.field.tag || (written && !validTag(written) ? "A tag has lowercase letters, digits and dashes, at most 32 characters." : null)} />` : null}
      ${action === "set_allowance" ? html`<${Field} label="Monthly allowance" value=${tokens} onInput=${setTokens}
        autocomplete="off" inputmode="numeric" hint="Tokens a month, such as 5M or 2500000. Leave it empty for the platform's default."
        error=${errors.field.tokens} />` : null}
      ${action === "delete" && suited.length ? html`<${Field} label=${`Type ${words} to confirm`} value=${typed}
        onInput=${setTyped} autocomplete="off" spellcheck="false" />` : null}
      <${FormError} message=${errors.form} />
      <div class="actions actions-end">
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class=${action === "delete" || action === "suspend" ? "danger" : "primary"}
          disabled=${busy || !ready}>${button}</button>
      </div>
    </${Form}>
  </${Dialog}>`;
}

/** A menu of the six actions on `users` (the Users tab's Selected Users, or one User's on their page). With
 * no User to act on, the button is off. */
export function UserActions({ users: chosen, me, onDone, label = "Selected Users", ariaLabel, ownRow = false }) {
  // The Users as they were when the dialog opened: onDone may reload them, or clear the selection.
  const [open, setOpen] = useState(null);
  const items = ACTIONS.map(([name, text]) => ({
    label: text, danger: name === "delete", onSelect: () => setOpen({ action: name, users: chosen }),
  }));
  return html`${chosen.length
      ? html`<${Menu} label=${label} ariaLabel=${ariaLabel} items=${items} align="start" class="users-actions" />`
      : html`<button type="button" class="menu-button" disabled>${label}</button>`}
    <${UserActionDialog} action=${open?.action || null} users=${open?.users || []} me=${me} ownRow=${ownRow}
      onClose=${() => setOpen(null)} onDone=${onDone} />`;
}
