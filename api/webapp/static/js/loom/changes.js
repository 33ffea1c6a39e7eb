// The changes of the Node that you read (spec: "Change the tree"): Edit (with Split at the
// cursor), Sibling, New root on the root, Delete Node, and Keys at the end of the buttons. The
// note beside them says why a change has to wait; the API refuses the same cases (409), and its
// message shows where the App could not tell in advance (another client's Branch, say).
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { Dialog } from "../components/dialog.js";
import { Field, FormError, splitError } from "../components/field.js";
import { Form } from "../components/form.js";
import { KeysTable, treeMover, useLoomKeys } from "./keys.js";

const GROWING = new Set(["queued", "running"]);
const STOP = "until it ends, or until you select Stop";

export const EMPTY_SPLIT = "A split at the start or the end would leave a Node empty. "
  + "Move the cursor inside the text, where the new child starts.";

/** The tree as waits() reads it: the page's Nodes (js/loom/nodes.js), or a read's list. */
function indexOf(loom, nodes) {
  if (nodes && nodes.childrenOf) {
    return { has: (id) => Boolean(nodes.get(id)), growing: [...nodes.growing], under: (id, other) => nodes.under(id, other) };
  }
  const list = (loom && Array.isArray(loom.nodes)) ? loom.nodes : [];
  const parents = new Map(list.map((each) => [each.id, each.parent_id]));
  return {
    has: (id) => parents.has(id),
    growing: list.filter((each) => GROWING.has(each.status)).map((each) => each.id),
    under(id, other) {
      for (let at = id; at; at = parents.get(at)) if (at === other) return true;
      return false;
    },
  };
}

/** Why each change of the Node waits, or null when it may go (ledger/work/loom_changes.py's
 * checks, in the App's words): {edit, sibling, root, delete}, edit standing for a split too.
 * With the page's Nodes, only the growing Nodes are walked: a Loom of 2,000 Nodes costs no more. */
export function waits(tree, node, isRoot, loomGrowing = false) {
  const growsUnder = (id) => tree.growing.some((each) => each !== id && tree.under(each, id));
  const anyGrows = loomGrowing || tree.growing.length > 0;
  let touched = null;  // a Branch that every change of this Node waits for
  if (GROWING.has(node.status)) touched = `This Node is ${node.status}, so a change waits ${STOP}.`;
  else if (growsUnder(node.id)) touched = `A Branch grows under this Node, so a change waits ${STOP}.`;
  const beside = !isRoot && growsUnder(node.parent_id)
    ? `A Branch grows under this Node's parent, so a sibling waits ${STOP}.` : null;
  const failed = node.status === "failed"
    ? "This Node failed, so it takes no edit or split. Grow a Branch under its parent, or delete it." : null;
  return {
    edit: touched || failed,
    sibling: isRoot ? null : touched || beside,
    root: isRoot ? touched || (anyGrows ? `A Branch grows in this Loom, so a new root waits ${STOP}.` : null) : null,
    delete: isRoot ? null : touched,
  };
}

/** Each reason once, in the order of the buttons. */
function noteOf(reasons) {
  return [...new Set([reasons.edit, reasons.sibling, reasons.root, reasons.delete].filter(Boolean))].join(" ");
}

/** Code points before `at` (UTF-16 units), as the API counts a split's offset. */
function codePoints(text, at = text.length) {
  return Array.from(text.slice(0, at)).length;
}

function nodePath(loom, node, tail = "") {
  return `account/looms/${loom.id}/nodes/${node.id}${tail}`;
}

/** A dialog with one Text field and its submit button: Edit this Node has Split at the cursor too. */
function TextDialog({ title, label = "Text", initial, submit, extra, intro, danger, onSend, onClose, split }) {
  const [text, setText] = useState(initial);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const box = useRef(null);
  const fields = splitError(error, ["text"]);
  async function send(body, path) {
    setBusy(true);
    setError(null);
    try {
      await onSend(body, path);
    } catch (failure) {
      setError({ message: failure.message, param: failure.param });
    } finally {
      setBusy(false);
    }
  }
  function atCursor() {
    const area = box.current && box.current.querySelector("textarea");
    if (!area) return;
    const offset = codePoints(text, area.selectionStart);
    if (offset === 0 || offset === codePoints(text)) {
      // The API would cut at the end (or leave the Node empty): the dialog asks first.
      setError({ message: EMPTY_SPLIT, param: "text" });
      area.focus();
      return;
    }
    split(text, offset, send);
  }
  return html`<${Dialog} open=${true} title=${title} onCancel=${onClose} class="loom-change-dialog">
    <${Form} onSubmit=${() => send({ text })}>
      ${intro ? html`<p>${intro}</p>` : null}
      <div ref=${box}>
        <${Field} label=${label} multiline rows="8" value=${text} onInput=${(value) => { setText(value); setError(null); }}
          hint=${split ? "To split the Node, put the cursor where the new child starts and select Split at the cursor." : null}
          error=${fields.field.text} />
      </div>
      <${FormError} message=${fields.form} />
      <div class="actions actions-end">
        <button type="button" onClick=${onClose}>Cancel</button>
        ${split ? html`<button type="button" class=${extra === "split" ? "primary" : ""} disabled=${busy} onClick=${atCursor}>Split at the cursor</button>` : null}
        <button type="submit" class=${danger ? "danger" : extra === "split" ? "" : "primary"} disabled=${busy}>${submit}</button>
      </div>
    </${Form}>
  </${Dialog}>`;
}

function DeleteNodeDialog({ onDelete, onClose }) {
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  async function remove() {
    setBusy(true);
    try {
      await onDelete();
    } catch (failure) {
      setError(failure.message);
      setBusy(false);
    }
  }
  return html`<${Dialog} open=${true} title="Delete this Node?" onCancel=${onClose}>
    <${Form} onSubmit=${remove}>
      <p>The Node and the Nodes under it go. You cannot undo it.</p>
      <${FormError} message=${error} />
      <div class="actions actions-end">
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="danger" disabled=${busy}>Delete Node</button>
      </div>
    </${Form}>
  </${Dialog}>`;
}

function KeysDialog({ onClose }) {
  return html`<${Dialog} open=${true} title="Keys" onCancel=${onClose} class="loom-keys-dialog">
    <p>These keys act on the Node that you read, when the focus is not in a text box or a dialog.</p>
    <${KeysTable} />
    <div class="actions actions-end"><button type="button" class="primary" onClick=${onClose}>Close</button></div>
  </${Dialog}>`;
}

/** The Node's change buttons and their note, with the page's keys: the page's own props
 * (pages/loom.js): `loomId`; `nodes`, its Nodes (js/loom/nodes.js), or else `loom.nodes`, a
 * read's list; `node`, the Node read (null: only Keys and the moves); `changed(loom, selectId)`
 * takes each change's answer, the whole Loom, and the Node to read next (the parent after a
 * delete, a new sibling or root); `branch()` grows a Branch (`g`) while `canBranch`; `select`,
 * `expanded` and `toggle` move in the tree (`move(key)` instead, where given). */
export function NodeActions(props) {
  const { loomId, nodes, node, isRoot, growing = false, changed, branch, canBranch, select, expanded, toggle } = props;
  const loom = props.loom || { id: loomId };
  const root = node ? (isRoot === undefined ? !node.parent_id : isRoot) : false;
  const tree = indexOf(loom, nodes);
  const [open, setOpen] = useState(null);  // "edit", "split", "sibling", "root", "delete", "keys"
  const [refusal, setRefusal] = useState(null);
  const reasons = node ? waits(tree, node, root, growing) : {};
  const on = {
    branch: Boolean(node && branch && canBranch),
    edit: Boolean(node && !reasons.edit), split: Boolean(node && !reasons.edit),
    sibling: Boolean(node && !root && !reasons.sibling),
    delete: Boolean(node && !root && !reasons.delete),
    keys: true,
  };
  const state = node ? `${node.id} ${node.status} ${noteOf(reasons)}` : "";
  // A refusal speaks of the tree as it was: another Node, or a Branch that ended, clears it.
  useEffect(() => setRefusal(null), [state]);
  useEffect(() => setOpen((was) => (was === "keys" ? was : null)), [node && node.id]);
  const move = props.move || (nodes && expanded && select
    ? treeMover({ nodes, expanded, selectedId: node ? node.id : null, select, toggle }) : null);
  useLoomKeys({
    on, move,
    act: (action) => (action === "branch" ? branch() : setOpen(action)),
  });

  function close() {
    setOpen(null);
  }
  async function change(path, body, read) {
    try {
      const answer = await api(path, { method: body === undefined ? "DELETE" : "POST", body });
      const next = read ? read(answer) : null;  // before the answer replaces the page's Nodes
      setRefusal(null);
      setOpen(null);
      changed(answer, next || undefined);
    } catch (failure) {
      if (failure.status === 409) setRefusal(failure.message);
      throw failure;
    }
  }
  function newSibling(answer) {
    const made = answer.nodes.filter((each) => each.parent_id === node.parent_id && !tree.has(each.id));
    return made.length ? made[made.length - 1].id : null;
  }
  // A split of the Node's own text keeps each half's log probabilities; an edited one sends it.
  async function split(text, offset, send) {
    await send(text === node.text ? { offset } : { offset, text }, "/split");
    if (toggle) toggle(node.id, true);  // the new child in view
  }

  const note = refusal || noteOf(reasons);
  return html`<div class="loom-changes">
    <div class="loom-change-buttons">
      <button type="button" disabled=${!on.edit} onClick=${() => setOpen("edit")}>Edit</button>
      ${root ? null : html`<button type="button" disabled=${!on.sibling} onClick=${() => setOpen("sibling")}>Sibling</button>`}
      ${root ? html`<button type="button" disabled=${Boolean(reasons.root)} onClick=${() => setOpen("root")}>New root</button>` : null}
      ${root ? null : html`<button type="button" disabled=${!on.delete} onClick=${() => setOpen("delete")}>Delete Node</button>`}
      <button type="button" onClick=${() => setOpen("keys")}>Keys</button>
    </div>
    <p class="loom-change-note hint" role="status">${note}</p>
    ${!node ? null : open === "edit" || open === "split" ? html`<${TextDialog} title="Edit this Node" initial=${node.text} submit="Save"
      extra=${open} split=${split} onClose=${close}
      onSend=${(body, tail = "") => change(nodePath(loom, node, tail), body)} />` : null}
    ${node && open === "sibling" ? html`<${TextDialog} title="Write a sibling" initial="" submit="Add sibling" onClose=${close}
      onSend=${(body) => change(nodePath(loom, node, "/sibling"), body, newSibling)} />` : null}
    ${node && open === "root" ? html`<${TextDialog} title="Write a new root" initial="" submit="Replace the tree" danger
      intro="Replace the tree replaces the whole tree, and every Node of the Loom goes." onClose=${close}
      onSend=${(body) => change(`account/looms/${loom.id}/root`, body, (answer) => answer.nodes[0] && answer.nodes[0].id)} />` : null}
    ${node && open === "delete" ? html`<${DeleteNodeDialog} onClose=${close}
      onDelete=${() => change(nodePath(loom, node), undefined, () => node.parent_id)} />` : null}
    ${open === "keys" ? html`<${KeysDialog} onClose=${close} />` : null}
  </div>`;
}
