// The Runs that the page knows, by id, as the list, a read or the stream last had them.
import { useState } from "preact/hooks";
import { listRuns } from "./runs.js";

/** Runs by id, as the list, a read or the stream last had them; `full` marks a Run with its
 * log probabilities (the list leaves them out). */
export function useRuns() {
  const [state, setState] = useState({ order: null, byId: {}, full: new Set(), failed: false });
  const merge = (docs, { full = true, listed = false } = {}) => setState((old) => {
    const byId = { ...old.byId };
    const fullSet = new Set(old.full);
    let order = old.order ? [...old.order] : [];
    for (const doc of docs) {
      if (doc.deleted) {
        delete byId[doc.id];
        order = order.filter((id) => id !== doc.id);
        continue;
      }
      const had = byId[doc.id];
      // A list's Run has no log probabilities: it never replaces a full one of the same state.
      if (!full && had && fullSet.has(doc.id) && had.status === doc.status && JSON.stringify(had.usage) === JSON.stringify(doc.usage)) continue;
      byId[doc.id] = doc;
      if (full) fullSet.add(doc.id); else fullSet.delete(doc.id);
      if (!order.includes(doc.id)) order.push(doc.id);
    }
    if (listed) {
      // The list is the truth of what exists: a Run deleted in another tab goes, but not one
      // started after the list was read.
      const listedIds = new Set(docs.map((doc) => doc.id));
      const newest = Math.max(0, ...docs.map((doc) => doc.number));
      order = order.filter((id) => listedIds.has(id) || byId[id].number > newest);
    }
    order.sort((a, b) => byId[b].number - byId[a].number);
    return { order, byId, full: fullSet, failed: listed ? false : old.failed };
  });
  const forget = (id) => merge([{ id, deleted: true }]);
  const load = async () => {
    try {
      const answer = await listRuns();
      merge(answer.data, { full: false, listed: true });
      return answer.data;
    } catch {
      setState((old) => ({ ...old, order: old.order || [], failed: true }));
      return null;
    }
  };
  return [state, merge, forget, load];
}
