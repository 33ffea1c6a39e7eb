// The Loom page's keys (spec: "Use the keyboard"): each acts on the Node that you read, only
// when the focus is not in a text box or a dialog, and only while its button is on.
import { useEffect, useRef } from "preact/hooks";
import { html } from "../html.js";
import { treeMove, visibleRows } from "./tree.js";

// The spec's table, word for word: the Keys dialog and `?` show it.
export const KEYS = [
  [["g"], "Grow a Branch under the Node"],
  [["e"], "Edit the Node"],
  [["s"], html`Split the Node, with <strong>Split at the cursor</strong> in the edit dialog`],
  [["i"], "Write a sibling of the Node"],
  [["Delete"], "Delete the Node and the Nodes under it"],
  [["↑", "↓", "←", "→", "Home", "End"], "Move in the tree"],
  [["Esc"], "Close a dialog"],
  [["?"], "Show these keys"],
];

// The keys that move in the tree: the page's move() takes the key's name, as tree.js's treeMove.
const MOVES = new Set(["ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "Home", "End"]);
const ACTIONS = { g: "branch", e: "edit", s: "split", i: "sibling", Delete: "delete", "?": "keys" };

export function KeysTable() {
  return html`<div class="table-scroll"><table class="table loom-keys">
    <thead><tr><th scope="col">Key</th><th scope="col">What it does</th></tr></thead>
    <tbody>${KEYS.map(([keys, what]) => html`<tr>
      <td>${keys.map((key, at) => html`${at ? (at < 4 ? " " : ", ") : null}<kbd>${key}</kbd>`)}</td>
      <td>${what}</td>
    </tr>`)}</tbody>
  </table></div>`;
}

/** move(key) over the Tree's rows, as the tree's own keys move (tree.js's treeMove): from the
 * selected Node, or to the first row when none is. */
export function treeMover({ nodes, expanded, selectedId, select, toggle }) {
  return (key) => {
    const step = treeMove(nodes, visibleRows(nodes, expanded), expanded, selectedId, key);
    if (!step) return;
    if (step.select) select(step.select);
    else if (step.expand && toggle) toggle(step.expand, true);
    else if (step.collapse && toggle) toggle(step.collapse, false);
  };
}

/** Whether a key pressed here is the page's: not in a text box (where each key is text), nor in a
 * dialog (whose own keys, Esc among them, are the dialog's), nor while a dialog is open. */
function forThePage(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return false;
  const target = event.target;
  if (target && target.closest) {
    if (target.closest("input, textarea, select, [contenteditable=''], [contenteditable='true'], dialog")) return false;
  }
  return !document.querySelector("dialog[open]");
}

/** Binds the keys while mounted. `on` says which actions' buttons are on ({branch, edit, split,
 * sibling, delete, keys, move}); `act(name)` runs an action; `move(key)` moves in the tree, by
 * the key's name ("ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "Home", "End"). A key whose
 * button is off does nothing. */
export function useLoomKeys({ on, act, move }) {
  // The latest props, read at the key press: the listener is bound once.
  const latest = useRef({ on, act, move });
  latest.current = { on, act, move };
  useEffect(() => {
    function press(event) {
      // A control that handles the key itself (the tree's own arrows, say) has prevented it.
      if (event.defaultPrevented || !forThePage(event)) return;
      const { on: enabled, act: run, move: go } = latest.current;
      if (MOVES.has(event.key)) {
        if (!go || enabled.move === false) return;
        event.preventDefault();
        go(event.key);
        return;
      }
      const action = ACTIONS[event.key];
      if (!action || !enabled[action]) return;
      event.preventDefault();
      run(action);
    }
    document.addEventListener("keydown", press);
    return () => document.removeEventListener("keydown", press);
  }, []);
}
