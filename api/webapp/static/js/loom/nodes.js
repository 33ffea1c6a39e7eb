// A Loom's Nodes as the page holds them: a Map by id, each parent's children in their order, the
// roots, and the Nodes that grow. A stream's Node is a change to it (put), never a read of the
// whole tree again, so a Loom of 2,000 Nodes takes each event in constant time.
import { GROWING } from "./api.js";

export class Nodes {
  constructor(list = []) {
    this.byId = new Map();
    this.children = new Map(); // parent id -> [child id], in the order of a read
    this.roots = [];
    this.growing = new Set();
    for (const node of list) this.put(node);
  }

  /** Add a Node, or replace the one of its id (a new object, so that its row draws again);
   * whether it is new. A read lists each parent before its children, and so does a stream. */
  put(node) {
    const had = this.byId.get(node.id);
    this.byId.set(node.id, node);
    if (GROWING.has(node.status)) this.growing.add(node.id);
    else this.growing.delete(node.id);
    if (had) return false;
    if (node.parent_id === null || node.parent_id === undefined) this.roots.push(node.id);
    else {
      const list = this.children.get(node.parent_id);
      if (list) list.push(node.id);
      else this.children.set(node.parent_id, [node.id]);
    }
    return true;
  }

  get(id) {
    return this.byId.get(id) || null;
  }

  childrenOf(id) {
    return this.children.get(id) || [];
  }

  get size() {
    return this.byId.size;
  }

  /** The Nodes from a root down to `id`. */
  path(id) {
    const path = [];
    for (let node = this.get(id); node; node = node.parent_id ? this.get(node.parent_id) : null) path.push(node);
    return path.reverse();
  }

  pathText(id) {
    return this.path(id).map((node) => node.text).join("");
  }

  /** Whether `id` is `other` or under it. */
  under(id, other) {
    for (let node = this.get(id); node; node = node.parent_id ? this.get(node.parent_id) : null) {
      if (node.id === other) return true;
    }
    return false;
  }
}

/** The settings of the Loom's last Branch, read from its Nodes where the export's are not to hand:
 * the Node with a request that was made last (ids are UUIDv7, so they sort by time), and how many
 * of its siblings share its Branch. */
export function lastRequestOf(nodes) {
  let last = null;
  for (const node of nodes.byId.values()) {
    if (node.request && (!last || node.id > last.id)) last = node;
  }
  if (!last) return null;
  const stamp = last.id.slice(0, 13);
  const n = nodes.childrenOf(last.parent_id).filter((id) => id.slice(0, 13) === stamp && nodes.get(id).request).length;
  return { ...last.request, n: Math.max(1, Math.min(8, n)) };
}
