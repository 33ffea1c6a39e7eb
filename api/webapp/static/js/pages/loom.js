// The Loom page (spec: "Use the Loom page"): open the Loom you changed last, or start one; Your
// Looms beside it; the Tree (or the Graph) of its Nodes; Text of the path to the Node you read;
// Branch with the settings of the last Branch, each Node's text as it arrives through the Loom's
// stream (also after a reload, and when another client branched), Stop; rename, pin, delete,
// export and import; Copy text and Path as text.
//
// The Nodes live in one Nodes map (loom/nodes.js): a stream's event changes one Node of it, so a
// Loom of 2,000 Nodes is not read again whole for each token that it grows. A change of the tree
// (a Branch, an edit, a delete of a Node, here or by another client) shows in the list's
// `updated_at`, read every few seconds: the page then reads the Loom once, and follows it again
// while a Node grows. A stream sends the Nodes that change, never a Node that goes, so another
// client's delete reaches the page this way alone, also while a stream is open. `updated_at`
// counts whole seconds, so a change in the second that the page knows leaves it as it was: one more
// read, a second after the page learned that second, sees each change of it. The open Loom gone
// from the list is read once: a 404 says that another client deleted it.
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "../html.js";
import { useCopy } from "../components/copy.js";
import { number } from "../components/format.js";
import { PageHeader } from "../notice.js";
import { leaveMarksOut } from "../playground/tokens.js";
import { modelStatus, startLine, startingModel, useModels } from "../playground/models.js";
import { GROWING, branchAt, changeLoom, deleteLoom, exportLoom, followLoom, listLooms, readLoom, stopLoom } from "../loom/api.js";
import { DeleteLoomDialog, RenameDialog } from "../loom/dialogs.js";
import { NewLoom, download, exportName } from "../loom/files.js";
import { LoomsList, titleOf } from "../loom/looms_list.js";
import { Nodes } from "../loom/nodes.js";
import { BranchSettings, branchBody, errorsOfBranch, loomDefaults, openingSettings } from "../loom/settings.js";
import { PathText } from "../loom/text.js";
import { TreeView } from "../loom/tree.js";
import { Graph } from "../loom/graph.js";
import { NodeActions } from "../loom/changes.js";

const LIST_EVERY_MS = 3000;
const STATUS_EVERY_MS = 5000;
const VIEW = "acs-loom-view";
const EXPAND_ALL_UP_TO = 300; // a Loom this small opens with every Node's children in view
const SAME_SECOND_MS = 1200; // a read this long after the page learned an `updated_at` sees all of its second

function loomAddress(id) {
  return id ? `loom?loom=${encodeURIComponent(id)}` : "loom";
}

/** The Loom changed last: the list's newest `updated_at`, pinned or not. */
function changedLast(looms) {
  let best = null;
  for (const loom of looms) if (!best || loom.updated_at > best.updated_at) best = loom;
  return best;
}

function useView() {
  const [view, setView] = useState(() => (localStorage.getItem(VIEW) === "graph" ? "graph" : "tree"));
  const set = (next) => {
    localStorage.setItem(VIEW, next);
    setView(next);
  };
  return [view, set];
}

function modelOf(models, served) {
  return (models || []).find((m) => m.id === served || m.name === served) || null;
}

export default function LoomPage({ route }) {
  const models = useModels();
  const [looms, setLooms] = useState(null);
  const [listFailed, setListFailed] = useState(false);
  const [openId, setOpenId] = useState(() => route.query.get("loom"));
  const [starting, setStarting] = useState(false); // New Loom in view
  const [meta, setMeta] = useState(null); // the open Loom: {id, title, pinned}
  const [missing, setMissing] = useState(null);
  const nodesRef = useRef(new Nodes());
  const [version, setVersion] = useState(0);
  const [selectedId, setSelectedId] = useState(null);
  const [expanded, setExpanded] = useState(() => new Set());
  const [settings, setSettings] = useState(() => loomDefaults(""));
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [statuses, setStatuses] = useState({});
  const [renaming, setRenaming] = useState(null);
  const [deleting, setDeleting] = useState(null);
  const [view, setView] = useView();
  const [copy, copyDialog, copyStatus] = useCopy();
  const follower = useRef(null); // {id, end} of the open stream
  const stamp = useRef(0); // the open Loom's updated_at, as far as this page knows it
  const stampAt = useRef(0); // when the page learned it (Date.now()); 0 once a read made a second later saw it
  const listed = useRef(false); // whether the open Loom was in the last list that the page read
  const frame = useRef(0);
  const openRef = useRef(openId);
  openRef.current = openId;

  const nodes = nodesRef.current;
  const selected = nodes.get(selectedId);

  // Many events in one frame draw once.
  const redraw = () => {
    if (frame.current) return;
    frame.current = requestAnimationFrame(() => { frame.current = 0; setVersion((v) => v + 1); });
  };

  // A copy of the page's text leaves the heatmap's ⏎ and ⇥ marks out.
  useEffect(() => {
    document.addEventListener("copy", leaveMarksOut);
    return () => document.removeEventListener("copy", leaveMarksOut);
  }, []);

  async function loadList() {
    try {
      const answer = await listLooms();
      setLooms(answer.data);
      setListFailed(false);
      return answer.data;
    } catch {
      setListFailed(true);
      return null;
    }
  }

  // -- following the open Loom's stream ---------------------------------------------------------

  function put(node) {
    const store = nodesRef.current;
    const parentHadKids = node.parent_id ? store.childrenOf(node.parent_id).length > 0 : true;
    const isNew = store.put(node);
    // A leaf that gets its first children opens, so that a new Branch is in view.
    if (isNew && node.parent_id && !parentHadKids) setExpanded((old) => (old.has(node.parent_id) ? old : new Set(old).add(node.parent_id)));
    redraw();
  }

  function stopFollowing() {
    if (follower.current) follower.current.end();
    follower.current = null;
  }

  function follow(id) {
    if (follower.current && follower.current.id === id) return;
    stopFollowing();
    const mine = followLoom(id, (node) => { if (openRef.current === id) put(node); }, (failure, status) => {
      if (openRef.current !== id) return;
      if (status === 404) setMissing(id);
      else setError(failure.message);
    });
    const entry = { id, end: mine.end };
    follower.current = entry;
    mine.done.then(async (ended) => {
      if (follower.current !== entry) return;
      follower.current = null;
      // The stream ended while this page still shows a growing Node (one deleted elsewhere): read the Loom.
      if (ended && nodesRef.current.growing.size && openRef.current === id) await refresh(id);
    });
  }

  /** Read the Loom whole (on open, and after another client changed it while no stream was open). */
  async function refresh(id, { first = false } = {}) {
    try {
      const loom = await readLoom(id);
      if (openRef.current !== id) return;
      show(loom, { first });
      if (nodesRef.current.growing.size) {
        // A stream still open may have brought Nodes newer than this read, which the read has just
        // replaced: a new stream starts with every Node as it is now.
        if (follower.current) stopFollowing();
        follow(id);
      }
    } catch (failure) {
      if (openRef.current !== id) return;
      if (failure.status === 404) setMissing(id);
      else setError(failure.message);
    }
  }

  /** A whole Loom (a read, a change's answer) replaces the page's Nodes. */
  function show(loom, { first = false } = {}) {
    const before = nodesRef.current;
    const store = new Nodes(loom.nodes);
    nodesRef.current = store;
    setMeta({ id: loom.id, title: loom.title, pinned: loom.pinned });
    setMissing(null);
    setSelectedId((old) => {
      if (first || !old) return store.roots[0] || null;
      if (store.get(old)) return old;
      // The Node read was deleted (by another client): read the nearest Node above it that is left.
      const left = before.path(old).reverse().find((node) => store.get(node.id));
      return left ? left.id : store.roots[0] || null;
    });
    if (first) {
      // A Loom opens with the settings of its last Branch, which the App's read adds.
      const last = loom.last_branch && loom.last_branch.last_generation_config
        ? { model: loom.last_branch.model, ...loom.last_branch.last_generation_config } : null;
      setSettings((old) => openingSettings(last, old.model));
      const open = new Set();
      if (store.size <= EXPAND_ALL_UP_TO) for (const [parent] of store.children) open.add(parent);
      else store.roots.forEach((root) => open.add(root));
      setExpanded(open);
    }
    redraw();
  }

  // -- opening a Loom ---------------------------------------------------------------------------

  function open(id) {
    if (id === openId && !starting) return;
    setStarting(false);
    setOpenId(id);
  }

  useEffect(() => {
    loadList().then((list) => {
      if (!list) return;
      if (!openRef.current) {
        const last = changedLast(list);
        if (last) setOpenId(last.id);
        else setStarting(true);
      }
    });
  }, []);

  useEffect(() => {
    stopFollowing();
    setError(null);
    setStatuses({});
    if (!openId) return undefined;
    const here = `${location.pathname}${location.search}`;
    const address = new URL(loomAddress(openId), document.baseURI);
    if (here !== `${address.pathname}${address.search}`) history.replaceState(null, "", address.href);
    nodesRef.current = new Nodes();
    setMeta(null);
    setSelectedId(null);
    const known = (looms || []).find((loom) => loom.id === openId);
    stamp.current = known ? known.updated_at : 0;
    stampAt.current = Date.now();
    listed.current = Boolean(known);
    refresh(openId, { first: true });
  }, [openId]);

  useEffect(() => () => stopFollowing(), []);

  // A new Loom page's settings start on a Warm model, else the default one.
  useEffect(() => {
    if (!models || !models.length || settings.model) return;
    startingModel(models).then((id) => setSettings((old) => (old.model ? old : { ...old, model: id })));
  }, [models]);

  /** The open Loom's `updated_at` as a list showed it: whether it is newer than the page knew. */
  function learn(updatedAt) {
    if (updatedAt <= stamp.current) return false;
    stamp.current = updatedAt;
    stampAt.current = Date.now();
    return true;
  }

  // The list, every few seconds: Your Looms, and another client's change of the open Loom.
  useEffect(() => {
    const timer = setInterval(async () => {
      if (document.hidden) return;
      const list = await loadList();
      const id = openRef.current;
      if (!list || !id) return;
      const entry = list.find((loom) => loom.id === id);
      if (!entry) {
        // Gone from the list: deleted elsewhere (a read answers 404), or past the newest 100.
        if (listed.current) refresh(id);
        listed.current = false;
        return;
      }
      listed.current = true;
      setMeta((old) => (old && old.id === id && (old.title !== entry.title || old.pinned !== entry.pinned)
        ? { ...old, title: entry.title, pinned: entry.pinned } : old));
      const first = stamp.current === 0;
      if (learn(entry.updated_at)) {
        if (!first) refresh(id);
      } else if (stampAt.current && Date.now() - stampAt.current >= SAME_SECOND_MS) {
        // Once, a second later: a change in the second that the page knows.
        stampAt.current = 0;
        refresh(id);
      }
    }, LIST_EVERY_MS);
    return () => clearInterval(timer);
  }, []);

  // -- the model-start line ---------------------------------------------------------------------

  const waitingModels = [];
  for (const id of nodes.growing) {
    const node = nodes.get(id);
    if (node && !node.text && node.request && !waitingModels.includes(node.request.model)) waitingModels.push(node.request.model);
  }
  const waitingKey = waitingModels.join(",");
  useEffect(() => {
    if (!waitingKey || !models) return undefined;
    let live = true;
    const ids = waitingModels.map((served) => (modelOf(models, served) || { id: served }).id);
    const read = () => Promise.all(ids.map((id) => modelStatus(id).then((s) => [id, s]).catch(() => [id, null])))
      .then((pairs) => live && setStatuses(Object.fromEntries(pairs)));
    read();
    const timer = setInterval(read, STATUS_EVERY_MS);
    return () => { live = false; clearInterval(timer); };
  }, [waitingKey, models]);
  const startLines = waitingModels.map((served) => {
    const model = modelOf(models, served);
    return startLine(model, statuses[model ? model.id : served]);
  }).filter(Boolean);

  // -- actions ----------------------------------------------------------------------------------

  const limits = (modelOf(models, settings.model) || {}).capabilities || {};
  const errors = errorsOfBranch(settings, limits);
  const canBranch = selected && (selected.status === "completed" || selected.status === "cancelled");
  const growing = nodes.growing.size > 0;

  async function branch() {
    if (!selected || !canBranch || busy) return;
    if (Object.keys(errors).length) {
      requestAnimationFrame(() => document.querySelector(".loom-settings .field-invalid input")?.focus());
      return;
    }
    setBusy(true);
    setError(null);
    const id = openId;
    try {
      const answer = await branchAt(id, selected.id, branchBody(settings, limits));
      if (openRef.current !== id) return;
      answer.data.forEach(put);
      setExpanded((old) => new Set(old).add(selected.id));
      follow(id);
      syncList(id);
    } catch (failure) {
      setError(failure.message);
    } finally {
      setBusy(false);
    }
  }

  /** The list again after this page changed the Loom: its title (a first Branch names it), and
   * its `updated_at`, so that the page does not take its own change for another client's. */
  async function syncList(id) {
    const list = await loadList();
    const entry = list ? list.find((loom) => loom.id === id) : null;
    if (!entry || openRef.current !== id) return;
    // This page's own change may share its second with another client's: that read a second later.
    if (!learn(entry.updated_at)) stampAt.current = Date.now();
    setMeta((old) => (old && old.id === id ? { ...old, title: entry.title, pinned: entry.pinned } : old));
  }

  async function stop() {
    setError(null);
    try {
      show(await stopLoom(openId));
      syncList(openId);
    } catch (failure) {
      setError(failure.message);
    }
  }

  /** A change of the tree answered the whole Loom (changes.js's dialogs): it replaces the Nodes. */
  function changed(loom, selectId) {
    show(loom);
    if (selectId) setSelectedId(selectId);
    if (nodesRef.current.growing.size) follow(loom.id);
    syncList(loom.id);
  }

  async function pin(loom, pinned) {
    setError(null);
    try {
      const answer = await changeLoom(loom.id, { pinned });
      if (answer.id === openRef.current) setMeta((old) => ({ ...old, pinned: answer.pinned }));
      loadList();
    } catch (failure) {
      setError(failure.message);
    }
  }

  async function rename(loom, title) {
    const answer = await changeLoom(loom.id, { title });
    if (answer.id === openRef.current) setMeta((old) => ({ ...old, title: answer.title }));
    setRenaming(null);
    syncList(openRef.current);
  }

  async function remove(loom) {
    await deleteLoom(loom.id);
    setDeleting(null);
    const list = (await loadList()) || [];
    if (loom.id === openRef.current) {
      stopFollowing();
      const next = changedLast(list.filter((other) => other.id !== loom.id));
      if (next) setOpenId(next.id);
      else {
        setOpenId(null);
        setMeta(null);
        nodesRef.current = new Nodes();
        history.replaceState(null, "", new URL(loomAddress(null), document.baseURI).href);
        setStarting(true);
      }
    }
  }

  async function exportFile() {
    setError(null);
    try {
      const file = await exportLoom(openId);
      download(exportName(meta && meta.title), `${JSON.stringify(file, null, 2)}\n`, "application/json");
    } catch (failure) {
      setError(failure.message);
    }
  }

  function started(loom) {
    setStarting(false);
    if (loom.id === openId) refresh(loom.id, { first: true });
    else setOpenId(loom.id);
    loadList();
  }

  function toggle(id, on) {
    setExpanded((old) => {
      const next = new Set(old);
      if (on) next.add(id); else next.delete(id);
      return next;
    });
  }

  // -- the page ---------------------------------------------------------------------------------

  const listLoom = (looms || []).find((loom) => loom.id === openId);
  const shown = meta || (listLoom ? { id: listLoom.id, title: listLoom.title, pinned: listLoom.pinned } : null);
  const pathText = selected ? nodes.pathText(selected.id) : "";
  const branchNote = !selected ? null
    : selected.status === "failed" ? "Branch works under a Node that completed or that you stopped. This Node failed."
    : GROWING.has(selected.status) ? "This Node grows. Branch under it once it ends, or select Stop." : null;

  const side = html`<aside class="loom-side" aria-label="Looms">
    <button type="button" class=${starting ? "" : "primary"} aria-pressed=${starting ? "true" : "false"}
      onClick=${() => setStarting(true)}>New Loom</button>
    <${LoomsList} looms=${looms} openId=${starting ? null : openId} failed=${listFailed} onOpen=${open}
      onPin=${pin} onRename=${setRenaming} onDelete=${setDeleting} />
  </aside>`;

  let body;
  if (starting || (!openId && looms !== null)) {
    body = html`<${NewLoom} onStarted=${started} onCancel=${openId ? () => setStarting(false) : null} />`;
  } else if (missing === openId) {
    body = html`<p class="form-error" role="alert">None of your Looms has this id. It may have been deleted.</p>`;
  } else if (!shown || !meta) {
    body = html`<p class="loading" role="status">Loading…</p>`;
  } else {
    const actionsNode = {
      // What the Node's buttons (loom/changes.js) and the keys (loom/keys.js) act on:
      loomId: openId, nodes, version, node: selected, select: setSelectedId, expanded, toggle,
      changed, branch, canBranch, growing,
    };
    body = html`<div class="loom-open">
      <header class="loom-head">
        <h2 class="loom-title-line">
          <button type="button" class="loom-title" title=${titleOf(shown)} onClick=${() => setRenaming(shown)}>${titleOf(shown)}</button>
        </h2>
        <div class="loom-head-buttons">
          <button type="button" onClick=${() => pin(shown, !shown.pinned)}>${shown.pinned ? "Unpin" : "Pin"}</button>
          <button type="button" onClick=${exportFile}>Export</button>
          <button type="button" class="danger-outline" onClick=${() => setDeleting(shown)}>Delete Loom</button>
        </div>
      </header>
      ${startLines.map((line) => html`<p class="start-line" role="status">${line}</p>`)}
      ${error ? html`<p class="form-error" role="alert">${error}</p>` : null}
      <div class="loom-work">
        <section class="loom-nodes" aria-label="Nodes">
          <div class="segmented" role="group" aria-label="Tree or Graph">
            <button type="button" aria-pressed=${view === "tree" ? "true" : "false"} onClick=${() => setView("tree")}>Tree</button>
            <button type="button" aria-pressed=${view === "graph" ? "true" : "false"} onClick=${() => setView("graph")}>Graph</button>
          </div>
          ${view === "graph"
            ? html`<${Graph} nodes=${nodes} version=${version} selectedId=${selectedId} onSelect=${setSelectedId} />`
            : html`<${TreeView} nodes=${nodes} version=${version} selectedId=${selectedId} expanded=${expanded}
                onSelect=${setSelectedId} onToggle=${toggle} />`}
          <p class="muted loom-count">${number(nodes.size)} Node${nodes.size === 1 ? "" : "s"}</p>
        </section>
        <section class="loom-node" aria-label="The Node">
          <${PathText} nodes=${nodes} node=${selected} version=${version} />
          <div class="node-actions">
            <button type="button" disabled=${!selected} onClick=${() => copy(pathText, "the text")}>Copy text</button>
            <button type="button" disabled=${!selected} onClick=${() => download("loom-path.txt", pathText)}>Path as text</button>
            <${NodeActions} ...${actionsNode} />
          </div>
          <div class="branch-actions">
            <button type="button" class="primary" disabled=${busy || !canBranch || !settings.model} onClick=${branch}>Branch</button>
            ${growing ? html`<button type="button" onClick=${stop}>Stop</button>` : null}
            <span class="status-line" role="status">${copyStatus}</span>
          </div>
          ${branchNote ? html`<p class="hint branch-note">${branchNote}</p>` : null}
          <${BranchSettings} settings=${settings} errors=${errors} models=${models || []} limits=${limits} onChange=${setSettings} />
        </section>
      </div>
    </div>`;
  }

  return html`<${PageHeader} title="Loom" />
    <div class="loom-page">
      ${side}
      <div class="loom-main">${body}</div>
    </div>
    <${RenameDialog} loom=${renaming} onSave=${rename} onClose=${() => setRenaming(null)} />
    <${DeleteLoomDialog} loom=${deleting} onDelete=${remove} onClose=${() => setDeleting(null)} />
    ${copyDialog}`;
}
