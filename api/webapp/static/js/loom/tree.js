// The Tree view of a Loom (spec: "Branch under a Node"): a real tree (role tree, each Node a
// treeitem with its level, its place among its siblings and, with children, aria-expanded), the
// arrow keys, Home and End move in it, and the selection follows. Only the rows of expanded
// Nodes exist (visibleRows), and of those only the ones in the tree's scrolled window are drawn,
// each a row that draws again only when its own Node changed: a Loom of 2,000 Nodes scrolls and
// streams without the page stalling.
import { Component } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { html } from "../html.js";

export const ROW_PX = 34;
const OVERSCAN = 8;

export const STATUS_WORDS = { queued: "Waiting", running: "Running", failed: "Failed", cancelled: "Stopped" };
const BADGE = { queued: "queued", running: "running", failed: "failed", cancelled: "stopped" };

/** The rows in view when the Nodes of `expanded` are open: depth first, each with its level (from
 * 1), its place among its siblings (from 1) and their count. */
export function visibleRows(nodes, expanded) {
  const rows = [];
  const stack = [];
  const push = (ids, level) => {
    for (let i = ids.length - 1; i >= 0; i -= 1) stack.push([ids[i], level, i + 1, ids.length]);
  };
  push(nodes.roots, 1);
  while (stack.length) {
    const [id, level, posinset, setsize] = stack.pop();
    rows.push({ id, level, posinset, setsize });
    if (expanded.has(id)) push(nodes.childrenOf(id), level + 1);
  }
  return rows;
}

/** Where a key moves in the tree from `id`: {select} a Node, {expand} or {collapse} one; null
 * for a key that does not move. The keyboard's table (spec: "Use the keyboard"). */
export function treeMove(nodes, rows, expanded, id, key) {
  const at = rows.findIndex((row) => row.id === id);
  const node = nodes.get(id);
  if (at < 0 || !node) return rows.length ? { select: rows[0].id } : null;
  const kids = nodes.childrenOf(id);
  switch (key) {
    case "ArrowDown": return at + 1 < rows.length ? { select: rows[at + 1].id } : null;
    case "ArrowUp": return at > 0 ? { select: rows[at - 1].id } : null;
    case "Home": return { select: rows[0].id };
    case "End": return { select: rows[rows.length - 1].id };
    case "ArrowRight":
      if (!kids.length) return null;
      return expanded.has(id) ? { select: kids[0] } : { expand: id };
    case "ArrowLeft":
      if (kids.length && expanded.has(id)) return { collapse: id };
      return node.parent_id ? { select: node.parent_id } : null;
    default: return null;
  }
}

/** The first line of a Node's text, for its row. */
export function firstLine(text) {
  const line = (text || "").replace(/^\s*\n/, "").split("\n")[0];
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

class Row extends Component {
  shouldComponentUpdate(next) {
    const now = this.props;
    return next.node !== now.node || next.top !== now.top || next.selected !== now.selected || next.open !== now.open
      || next.hasKids !== now.hasKids || next.row.posinset !== now.row.posinset || next.row.setsize !== now.row.setsize
      || next.row.level !== now.row.level;
  }

  render({ node, row, top, selected, open, hasKids, onSelect, onToggle }) {
    const status = STATUS_WORDS[node.status];
    const line = firstLine(node.text);
    return html`<div role="treeitem" id=${`node-${node.id}`} class=${`tree-row${selected ? " tree-row-selected" : ""}`}
      style=${{ top: `${top}px`, paddingLeft: `${0.4 + (row.level - 1) * 1.1}rem` }}
      aria-level=${row.level} aria-posinset=${row.posinset} aria-setsize=${row.setsize}
      aria-selected=${selected ? "true" : "false"} aria-expanded=${hasKids ? (open ? "true" : "false") : undefined}
      onClick=${() => onSelect(node.id)}>
      <span class=${`tree-toggle${hasKids ? "" : " tree-leaf"}`} aria-hidden="true"
        onClick=${hasKids ? (event) => { event.stopPropagation(); onToggle(node.id, !open); } : undefined}>${hasKids ? (open ? "▾" : "▸") : "·"}</span>
      <span class=${`tree-text${line ? "" : " muted"}`}>${line || "No text yet"}</span>
      ${status ? html`<span class=${`badge badge-run-${BADGE[node.status]}`}>${status}</span>` : null}
    </div>`;
  }
}

/** The tree: `nodes` (nodes.js, changed in place; `version` says when), the selected Node, the
 * expanded ones. */
export function TreeView({ nodes, version, selectedId, expanded, onSelect, onToggle }) {
  const box = useRef(null);
  const [view, setView] = useState({ top: 0, height: 480 });
  const rows = visibleRows(nodes, expanded);
  const at = rows.findIndex((row) => row.id === selectedId);

  useLayoutEffect(() => {
    const element = box.current;
    if (!element) return undefined;
    const measure = () => setView({ top: element.scrollTop, height: element.clientHeight || 480 });
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(element);
    return () => observer.disconnect();
  }, []);
  // The selected row stays in the window: the keys move it out of view, the page selects a new Node.
  useEffect(() => {
    const element = box.current;
    if (!element || at < 0) return;
    const top = at * ROW_PX;
    if (top < element.scrollTop) element.scrollTop = top;
    else if (top + ROW_PX > element.scrollTop + element.clientHeight) element.scrollTop = top + ROW_PX - element.clientHeight;
  }, [selectedId, at]);

  function onKey(event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const move = treeMove(nodes, rows, expanded, selectedId, event.key);
    if (!move) return;
    event.preventDefault();
    if (move.select) onSelect(move.select);
    else if (move.expand) onToggle(move.expand, true);
    else if (move.collapse) onToggle(move.collapse, false);
  }

  const first = Math.max(0, Math.floor(view.top / ROW_PX) - OVERSCAN);
  const last = Math.min(rows.length, Math.ceil((view.top + view.height) / ROW_PX) + OVERSCAN);
  const drawn = [];
  for (let i = first; i < last; i += 1) {
    const row = rows[i];
    const kids = nodes.childrenOf(row.id);
    drawn.push(html`<${Row} key=${row.id} node=${nodes.get(row.id)} row=${row} top=${i * ROW_PX}
      selected=${row.id === selectedId} open=${expanded.has(row.id)} hasKids=${kids.length > 0}
      onSelect=${onSelect} onToggle=${onToggle} />`);
  }
  return html`<div class="tree" role="tree" aria-label="Tree" tabindex="0" ref=${box} data-version=${version}
    aria-activedescendant=${at >= first && at < last ? `node-${selectedId}` : undefined}
    onKeyDown=${onKey} onScroll=${(event) => setView({ top: event.currentTarget.scrollTop, height: event.currentTarget.clientHeight })}>
    <div role="none" class="tree-rows" style=${{ height: `${rows.length * ROW_PX}px` }}>${drawn}</div>
  </div>`;
}
