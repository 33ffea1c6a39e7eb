// The Loom's Graph (spec: "Read the tree as a graph"): each Node a dot with its first words, each
// Branch a line from its parent. Scroll to pan; Zoom in, Zoom out and Fit; hover (or focus) a dot
// for its whole first line; select it (click, or Enter) to read it.
//
// It stays usable at 2,000 Nodes:
// - The layout is computed once per shape (ids and parents), not when a Node's text grows, in O(n):
//   a tidy tree, left to right (see layoutTree).
// - Only the Nodes and lines inside a window around the view (the view and one view's size on each
//   side) are drawn, the lines as one path, on one SVG of the window's size: its own layer. A pan
//   moves that layer (a CSS transform, written straight to the DOM): no render, no layout and no
//   paint, only the compositor. The window is cut again when a pan leaves it, or on a zoom.
// - Below LABEL_MIN_SCALE the words are too small to read and are not drawn.
//
// The dots are one keyboard stop (a roving tabindex, ARIA's tree pattern with aria-level,
// aria-setsize and aria-posinset, since only the window is in the DOM): Left reads towards the
// parent, Right the first child, Up and Down the siblings, Home the root, End the last Node, and
// Enter or Space selects. Handled keys stop here, so the page's own arrow keys do not act twice.
import { useEffect, useId, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { html } from "../html.js";

const ROW = 30; // px between Nodes of one depth at scale 1
const COL = 200; // px between depths: the room for a label
const R = 6; // a dot's radius
const WORDS = 26; // characters of a dot's first words
const LABEL_MIN_SCALE = 0.45;
const MAX_SCALE = 3;
const STEP = 1.5; // one Zoom in or Zoom out
const PAD = 24; // px around the tree when it is fitted

/** The whole first line of a Node's text: its first line with text, without the spaces around it. */
export function firstLine(text) {
  const line = (text || "").replace(/^\s+/, "").split("\n", 1)[0];
  return line.trimEnd();
}

/** The first words of a line, cut at a space where one is near, up to `max` characters. */
export function firstWords(line, max = WORDS) {
  if (line.length <= max) return line;
  const cut = line.lastIndexOf(" ", max - 1);
  return `${line.slice(0, cut > max / 2 ? cut : max - 1).trimEnd()}…`;
}

/** The tidy layout (Reingold and Tilford's, left to right), O(n): each subtree is packed as close
 * under its elder sibling's as their outlines allow, depth by depth, and each parent sits midway
 * between its first and last child. Returns each Node's x (depth), y, level and place among its
 * siblings. A Node whose parent is not among `nodes` is drawn as a root, so a tree mid-change
 * still shows. */
export function layoutTree(nodes) {
  const byId = new Map();
  for (const node of nodes) byId.set(node.id, node);
  const children = new Map();
  const roots = [];
  for (const node of nodes) {
    const parent = node.parent_id;
    if (parent == null || !byId.has(parent) || parent === node.id) roots.push(node.id);
    else {
      const list = children.get(parent);
      if (list) list.push(node.id); else children.set(parent, [node.id]);
    }
  }
  // An outline: the highest (top) and lowest (bot) y at each depth under a subtree's root, stored
  // deepest first (so a parent's own depth is a push) and relative to `off`, so that a subtree
  // moves as a whole in O(1). Merging two outlines costs the shorter one's depth: O(n) in all.
  const rel = new Map(); // id -> y relative to its parent
  const order = []; // pre-order: the reading order
  const VIRTUAL = {}; // the roots' common parent, not drawn
  const kidsOf = (id) => (id === VIRTUAL ? roots : children.get(id) || []);
  const stack = [{ id: VIRTUAL, next: 0, outlines: [] }];
  let outline = null;
  while (stack.length) {
    const top = stack[stack.length - 1];
    const kids = kidsOf(top.id);
    if (top.next === 0 && top.id !== VIRTUAL) order.push(top.id);
    if (top.next < kids.length) {
      stack.push({ id: kids[top.next], next: 0, outlines: [] });
      top.next += 1;
      continue;
    }
    stack.pop();
    outline = place(top.id, kids, top.outlines, rel);
    if (stack.length) stack[stack.length - 1].outlines.push(outline);
  }
  const at = new Map(); // id -> {x, y, level, parent, posinset, setsize}
  let low = 0;
  let high = 0;
  let maxLevel = 1;
  const walk = [];
  roots.forEach((id, i) => walk.push([id, 0, 1, null, i + 1, roots.length]));
  while (walk.length) {
    const [id, base, level, parent, posinset, setsize] = walk.pop();
    const y = base + rel.get(id);
    low = Math.min(low, y);
    high = Math.max(high, y);
    maxLevel = Math.max(maxLevel, level);
    at.set(id, { x: (level - 1) * COL, y, level, parent, posinset, setsize });
    const kids = children.get(id) || [];
    kids.forEach((kid, i) => walk.push([kid, y, level + 1, id, i + 1, kids.length]));
  }
  for (const p of at.values()) p.y -= low;
  return { at, children, roots, order, width: (maxLevel - 1) * COL, height: high - low };
}

/** Places the children's outlines one under the other, as close as each depth allows; notes each
 * child's y relative to `id`, and returns the outline of `id`'s subtree. */
function place(id, kids, outlines, rel) {
  if (!kids.length) return { top: [0], bot: [0], off: 0 };
  let acc = outlines[0];
  const at = [0];
  for (let i = 1; i < kids.length; i += 1) {
    const next = outlines[i];
    const la = acc.top.length;
    const ln = next.top.length;
    const m = Math.min(la, ln);
    let shift = -Infinity;
    for (let d = 0; d < m; d += 1) {
      shift = Math.max(shift, acc.bot[la - 1 - d] + acc.off - next.top[ln - 1 - d] - next.off + ROW);
    }
    at.push(shift);
    if (ln <= la) { // the elder outline reaches as deep: the new one's bottom shows above its depth
      for (let d = 0; d < m; d += 1) acc.bot[la - 1 - d] = next.bot[ln - 1 - d] + next.off + shift - acc.off;
    } else { // the new one reaches deeper: it keeps its arrays, and the elder's top shows above
      const off = next.off + shift;
      for (let d = 0; d < m; d += 1) next.top[ln - 1 - d] = acc.top[la - 1 - d] + acc.off - off;
      next.off = off;
      acc = next;
    }
  }
  const mid = (at[0] + at[at.length - 1]) / 2;
  kids.forEach((kid, i) => rel.set(kid, at[i] - mid));
  acc.off -= mid;
  acc.top.push(-acc.off);
  acc.bot.push(-acc.off);
  return acc;
}

function shapeOf(nodes) {
  let key = "";
  for (const node of nodes) key += `${node.id}<${node.parent_id ?? ""},`;
  return key;
}

function clamp(value, low, high) {
  return Math.min(high, Math.max(low, value));
}

function fitted(shape, size) {
  const k = clamp(Math.min((size.w - 2 * PAD) / Math.max(1, shape.width + COL),
    (size.h - 2 * PAD) / Math.max(1, shape.height)), 1e-3, 1);
  // The labels reach one column to the right of the deepest dots.
  return { k, tx: (size.w - (shape.width + COL - 2 * R) * k) / 2 + R * k, ty: (size.h - shape.height * k) / 2 };
}

/** The part of the tree, in its own coordinates, that the view shows. */
function viewRect(view, size) {
  return { x0: -view.tx / view.k, y0: -view.ty / view.k, x1: (size.w - view.tx) / view.k, y1: (size.h - view.ty) / view.k };
}

function windowAround(view, size) {
  const r = viewRect(view, size);
  const w = r.x1 - r.x0;
  const h = r.y1 - r.y0;
  return { x0: r.x0 - w, y0: r.y0 - h, x1: r.x1 + w, y1: r.y1 + h };
}

/** Where the drawn window's layer goes on screen for this view. */
function shift(view, cut) {
  return `translate(${view.tx + cut.win.x0 * view.k}px, ${view.ty + cut.win.y0 * view.k}px)`;
}

function inside(r, win) {
  return r.x0 >= win.x0 && r.y0 >= win.y0 && r.x1 <= win.x1 && r.y1 <= win.y1;
}

/** The Nodes as an array, in their order: from an array, a Map by id, or the page's Nodes store. */
function listOf(nodes) {
  if (!nodes) return [];
  if (nodes.byId instanceof Map) return Array.from(nodes.byId.values());
  if (nodes instanceof Map) return Array.from(nodes.values());
  return Array.from(nodes);
}

/** `nodes`: the API's Node objects (an array, a Map by id, or the page's Nodes store, which changes
 * in place: then `version` changes with it). `onSelect(id)` reads a Node. */
export function Graph({ nodes, version = 0, selectedId = null, onSelect, label = "Graph of the Nodes" }) {
  const list = useMemo(() => listOf(nodes), [nodes, version]);
  const key = shapeOf(list);
  const shape = useMemo(() => layoutTree(list), [key]);
  const byId = useMemo(() => new Map(list.map((node) => [node.id, node])), [list]);
  const frame = useRef(null);
  const world = useRef(null);
  const layer = useRef(null);
  const tip = useRef(null);
  const view = useRef(null); // {k, tx, ty}: screen = tree * k + t
  const drag = useRef(null);
  const [size, setSize] = useState({ w: 0, h: 0 });
  const [cut, setCut] = useState(null); // {win, labels, k}: the window that the last render drew
  const [active, setActive] = useState(null); // the dot with tabindex 0
  const focusNext = useRef(false);
  const lastShape = useRef(shape);
  const tipId = useId();

  const activeId = active && shape.at.has(active) ? active
    : selectedId && shape.at.has(selectedId) ? selectedId : shape.roots[0] ?? null;

  // -- the view: one transform, and a new cut only when the view leaves the window ------------------
  function paint(next, recut = false) {
    if (!size.w) return;
    const box = { x0: -R, y0: -R, x1: shape.width + COL, y1: shape.height + R };
    // Keep some of the tree in view, so a long scroll cannot lose it.
    const keep = 40;
    next.tx = clamp(next.tx, keep - box.x1 * next.k, size.w - keep - box.x0 * next.k);
    next.ty = clamp(next.ty, keep - box.y1 * next.k, size.h - keep - box.y0 * next.k);
    view.current = next;
    hideTip();
    if (recut || !cut || cut.k !== next.k || !inside(viewRect(next, size), cut.win)) {
      setCut({ win: windowAround(next, size), labels: next.k >= LABEL_MIN_SCALE, k: next.k });
    } else if (layer.current) {
      layer.current.style.transform = shift(next, cut);
    }
  }

  function centreOn(id, k = view.current ? view.current.k : 1) {
    const p = shape.at.get(id);
    if (!p) return;
    // A third of the way in: the tree grows to the right of it.
    paint({ k, tx: Math.min(size.w / 3, 160) - p.x * k, ty: size.h / 2 - p.y * k }, true);
  }

  /** Pan only as far as needed to show the dot with its first words. */
  function reveal(id) {
    const p = shape.at.get(id);
    const v = view.current;
    if (!p || !v) return;
    const sx = p.x * v.k + v.tx;
    const sy = p.y * v.k + v.ty;
    const m = 24;
    const right = (R + 8 + 150) * Math.max(v.k, LABEL_MIN_SCALE);
    if (sx - R * v.k < m || sx + right > size.w - m || sy < m || sy > size.h - m) centreOn(id);
  }

  useLayoutEffect(() => {
    const measure = (w, h) => setSize((old) => (old.w === Math.floor(w) && old.h === Math.floor(h) ? old
      : { w: Math.floor(w), h: Math.floor(h) }));
    // Measured now, so the first frame already shows the tree; then on each resize.
    measure(frame.current.clientWidth, frame.current.clientHeight);
    const observer = new ResizeObserver(([entry]) => measure(entry.contentRect.width, entry.contentRect.height));
    observer.observe(frame.current);
    return () => observer.disconnect();
  }, []);

  // The first view: the whole tree when it is readable whole, else the read Node (or the root) at
  // full size. Afterwards a new size, or a new shape, keeps the Node that was read where it was.
  useLayoutEffect(() => {
    if (!size.w || !shape.roots.length) return;
    const before = lastShape.current;
    lastShape.current = shape;
    const v = view.current;
    if (!v) {
      const fit = fitted(shape, size);
      if (fit.k >= 1) paint(fit, true);
      else centreOn(activeId, 1);
      return;
    }
    const anchor = activeId;
    const was = before.at.get(anchor);
    const now = shape.at.get(anchor);
    if (before !== shape && was && now) paint({ k: v.k, tx: v.tx - (now.x - was.x) * v.k, ty: v.ty - (now.y - was.y) * v.k }, true);
    else paint({ ...v }, true);
  }, [shape, size.w, size.h]);

  // A Node selected elsewhere (the Tree, the keys) becomes the dot that the keyboard starts from, in view.
  useEffect(() => {
    if (selectedId && shape.at.has(selectedId)) {
      setActive(selectedId);
      if (view.current) reveal(selectedId);
    }
  }, [selectedId, shape]);

  // The layer's place, after each render: not a prop, since a pan writes it straight to the DOM
  // and Preact, comparing with its last render, would skip a value that came back to the same.
  useLayoutEffect(() => {
    if (layer.current && view.current && cut) layer.current.style.transform = shift(view.current, cut);
  });

  useEffect(() => {
    if (!focusNext.current || !activeId) return;
    focusNext.current = false;
    const dot = world.current && world.current.querySelector(`[data-id="${CSS.escape(activeId)}"]`);
    if (dot) dot.focus({ preventScroll: true });
  });

  // -- input ------------------------------------------------------------------------------------
  function zoom(factor, sx = size.w / 2, sy = size.h / 2) {
    const v = view.current;
    if (!v) return;
    const low = Math.min(fitted(shape, size).k, LABEL_MIN_SCALE);
    const k = clamp(v.k * factor, low, MAX_SCALE);
    paint({ k, tx: sx - ((sx - v.tx) / v.k) * k, ty: sy - ((sy - v.ty) / v.k) * k });
  }

  function onWheel(event) {
    const v = view.current;
    if (!v) return;
    event.preventDefault();
    const unit = event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? size.h : 1;
    if (event.ctrlKey) { // a pinch on a touchpad
      const box = frame.current.getBoundingClientRect();
      zoom(Math.exp(-event.deltaY * unit / 300), event.clientX - box.left, event.clientY - box.top);
      return;
    }
    const dx = (event.shiftKey && !event.deltaX ? event.deltaY : event.deltaX) * unit;
    const dy = (event.shiftKey && !event.deltaX ? 0 : event.deltaY) * unit;
    paint({ k: v.k, tx: v.tx - dx, ty: v.ty - dy });
  }

  // A drag pans too (a phone has no wheel); a press that does not move stays a click.
  function onPointerDown(event) {
    if (event.button !== 0 || !view.current) return;
    drag.current = { x: event.clientX, y: event.clientY, view: view.current, moved: false, id: event.pointerId };
  }
  function onPointerMove(event) {
    const d = drag.current;
    if (!d) return showTipAt(event.target);
    const dx = event.clientX - d.x;
    const dy = event.clientY - d.y;
    if (!d.moved && Math.hypot(dx, dy) < 4) return;
    if (!d.moved) frame.current.setPointerCapture(d.id);
    d.moved = true;
    paint({ k: d.view.k, tx: d.view.tx + dx, ty: d.view.ty + dy });
  }
  function onPointerUp() {
    const d = drag.current;
    drag.current = null;
    if (d && d.moved) {
      // The click that ends a drag is not a selection.
      frame.current.addEventListener("click", (e) => e.stopPropagation(), { capture: true, once: true });
      setTimeout(() => frame.current && frame.current.releasePointerCapture?.(d.id), 0);
    }
  }

  function choose(id) {
    setActive(id);
    if (onSelect) onSelect(id);
  }

  function onClick(event) {
    const dot = event.target.closest && event.target.closest("[data-id]");
    if (dot) choose(dot.dataset.id);
  }

  function move(to) {
    if (!to || !shape.at.has(to)) return;
    focusNext.current = true;
    setActive(to);
    reveal(to);
  }

  function onKeyDown(event) {
    const from = activeId;
    if (!from || event.altKey || event.ctrlKey || event.metaKey) return;
    const p = shape.at.get(from);
    const siblings = p.parent === null ? shape.roots : shape.children.get(p.parent);
    const place = siblings.indexOf(from);
    const targets = {
      ArrowLeft: () => p.parent,
      ArrowRight: () => (shape.children.get(from) || [])[0],
      ArrowUp: () => siblings[place - 1],
      ArrowDown: () => siblings[place + 1],
      Home: () => shape.roots[0],
      End: () => shape.order[shape.order.length - 1],
    };
    if (event.key in targets) move(targets[event.key]());
    else if (event.key === "Enter" || event.key === " ") choose(from);
    else return;
    event.preventDefault();
    event.stopPropagation();
  }

  // -- the tooltip: written to the DOM, so a hover does not render 2,000 dots again ------------------
  function showTipAt(target) {
    const dot = target && target.closest && target.closest("[data-id]");
    if (!dot) return hideTip();
    showTip(dot.dataset.id);
  }
  function showTip(id) {
    const node = byId.get(id);
    const p = shape.at.get(id);
    const v = view.current;
    const el = tip.current;
    if (!node || !p || !v || !el) return;
    if (el.dataset.id === id && !el.hidden) return;
    el.dataset.id = id;
    el.textContent = firstLine(node.text) || "(empty)";
    el.hidden = false;
    const sx = p.x * v.k + v.tx;
    const sy = p.y * v.k + v.ty;
    el.style.left = `${Math.round(clamp(sx - 12, 4, Math.max(4, size.w - el.offsetWidth - 4)))}px`;
    el.style.top = `${Math.round(sy + R * Math.max(v.k, 0.5) + 8 + el.offsetHeight > size.h ? sy - el.offsetHeight - 12 : sy + R * Math.max(v.k, 0.5) + 8)}px`;
  }
  function hideTip() {
    if (tip.current) tip.current.hidden = true;
  }

  // -- what is drawn ------------------------------------------------------------------------------
  const lines = [];
  const dots = [];
  if (cut && size.w) {
    const { win, labels, k } = cut;
    const dot = labels ? R : Math.max(R, 1.5 / k); // at least 1.5 px on screen
    const kept = new Set([activeId, selectedId]);
    for (const id of shape.order) {
      const p = shape.at.get(id);
      const parent = p.parent === null ? null : shape.at.get(p.parent);
      if (parent && p.x >= win.x0 && parent.x <= win.x1
        && Math.max(p.y, parent.y) >= win.y0 && Math.min(p.y, parent.y) <= win.y1) {
        const mx = (parent.x + p.x) / 2;
        lines.push(`M${parent.x + R} ${parent.y}C${mx} ${parent.y} ${mx} ${p.y} ${p.x - R} ${p.y}`);
      }
      const seen = p.x >= win.x0 - COL && p.x <= win.x1 && p.y >= win.y0 - ROW && p.y <= win.y1 + ROW;
      if (!seen && !kept.has(id)) continue;
      const node = byId.get(id);
      const line = firstLine(node.text);
      const selected = id === selectedId;
      dots.push(html`<g key=${id} data-id=${id} role="treeitem" class=${`loom-graph-node is-${node.status || "completed"}${selected ? " is-selected" : ""}`}
        transform=${`translate(${p.x} ${p.y})`} tabindex=${id === activeId ? "0" : "-1"}
        aria-label=${line || "(empty)"} aria-selected=${selected ? "true" : "false"}
        aria-level=${p.level} aria-setsize=${p.setsize} aria-posinset=${p.posinset}>
        ${labels ? html`<circle class="loom-graph-hit" r=${dot + 6} />` : null}
        ${selected ? html`<circle class="loom-graph-mark" r=${dot + 4} />` : null}
        <circle class="loom-graph-dot" r=${dot} />
        ${labels ? html`<text x=${R + 6} y="4">${firstWords(line) || "…"}</text>` : null}
      </g>`);
    }
  }
  return html`<div class="loom-graph">
    <div class="loom-graph-bar">
      <button type="button" onClick=${() => zoom(STEP)}>Zoom in</button>
      <button type="button" onClick=${() => zoom(1 / STEP)}>Zoom out</button>
      <button type="button" onClick=${() => paint(fitted(shape, size), true)}>Fit</button>
    </div>
    <div class="loom-graph-frame" ref=${frame} onWheel=${onWheel} onPointerDown=${onPointerDown}
      onPointerMove=${onPointerMove} onPointerUp=${onPointerUp} onPointerCancel=${onPointerUp}
      onPointerLeave=${() => !drag.current && hideTip()}
      onfocusin=${(e) => showTipAt(e.target)} onfocusout=${hideTip}>
      ${/* Focus listeners here, not on the SVG: Chromium makes an SVG element with one a Tab stop. */ null}
      <svg class=${cut && !cut.labels ? "loom-graph-svg is-far" : "loom-graph-svg"} ref=${layer} width=${cut ? 3 * size.w : size.w} height=${cut ? 3 * size.h : size.h}>
        <g ref=${world} transform=${cut ? `scale(${cut.k}) translate(${-cut.win.x0} ${-cut.win.y0})` : null}>
          <path class="loom-graph-lines" aria-hidden="true" d=${lines.join("")} />
          <g role="tree" aria-label=${label} onClick=${onClick} onKeyDown=${onKeyDown}>${dots}</g>
        </g>
      </svg>
      <div class="loom-graph-tip" id=${tipId} ref=${tip} aria-hidden="true" hidden></div>
    </div>
  </div>`;
}
