// The Playground (spec: "Use the Playground"): run a prompt with every setting of
// POST /v1/completions, compare up to 6 models, follow each Run as it grows on the server, read
// each token's probability, and find, restore, copy, export and delete Runs.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { html } from "../html.js";
import { ROOT, url } from "../api.js";
import { useCopy } from "../components/copy.js";
import { Menu } from "../components/menu.js";
import { PageHeader } from "../notice.js";
import { addressOf, draft, readAddress, rememberAddress, settingsPanel } from "../playground/address.js";
import { DeleteDialog } from "../playground/delete_dialog.js";
import { ModelsList, PromptBox } from "../playground/form.js";
import { BY_KEY, changesFrom, curlOf, defaults, differences, errorsOf, requestOf, settingsOf } from "../playground/fields.js";
import { modelStatus, startLine, startingModel, useModels } from "../playground/models.js";
import { RefusedView, RunView, asksLogprobs, matching, promptText } from "../playground/output.js";
import { GROWING, deleteRun, readRun, startRuns, stopGroup, stopRun, useFollow } from "../playground/runs.js";
import { useRuns } from "../playground/runs_state.js";
import { RunsTable, exportItems } from "../playground/runs_table.js";
import { SettingsPanel } from "../playground/settings_panel.js";
import { Legend, leaveMarksOut, tokensOf } from "../playground/tokens.js";

const LIST_EVERY_MS = 30000;
const STATUS_EVERY_MS = 5000;

function limitsOf(models, id) {
  const model = (models || []).find((m) => m.id === id);
  return model ? model.capabilities || {} : {};
}

/** The settings' errors: each out of range as typed, and a refusal's setting until it changes. */
function errorsWithFault(settings, limits, fault) {
  const errors = errorsOf(settings, limits);
  if (fault && !errors[fault.key] && currentValue(settings, fault.key) === fault.raw) errors[fault.key] = fault.message;
  return errors;
}

function currentValue(settings, key) {
  return key === "apply_steering_vectors" ? settings.steer : settings[key];
}

function faultOf(settings, error) {
  const key = error && error.param;
  if (!key || !(key in BY_KEY || key === "model" || key === "apply_steering_vectors")) return null;
  return { key, raw: currentValue(settings, key), message: error.message };
}

export default function Playground({ route }) {
  const models = useModels();
  const first = useMemo(() => readAddress(route.query), []);
  const [view, setView] = useState(() => ({
    list: first.models.length ? first.models : [defaults("")], compare: first.compare, heatmap: first.heatmap,
  }));
  const [active, setActive] = useState(0);
  const [prompt, setPromptState] = useState(draft.read);
  const [promptError, setPromptError] = useState(null);
  const [faults, setFaults] = useState({});
  const [slots, setSlots] = useState(null); // the Runs in view: [{id} | {refusal}]
  const [runError, setRunError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [chosen, setChosen] = useState(new Set());
  const [deleting, setDeleting] = useState(null);
  const [settingsClosed, setSettingsClosed] = useState(settingsPanel.closed);
  const [statuses, setStatuses] = useState({});
  const [runsState, merge, forget, loadRuns] = useRuns();
  const [copy, copyDialog, copyStatus] = useCopy();
  const written = useRef(null);
  const outputRef = useRef(null);

  const setPrompt = (text) => {
    setPromptState(text);
    draft.write(text);
    setPromptError(null);
  };
  const list = view.compare ? view.list : view.list.slice(0, 1);
  const editing = view.compare ? Math.min(active, list.length - 1) : 0;
  const errors = list.map((settings, i) => errorsWithFault(settings, limitsOf(models, settings.model), faults[i]));

  // A copy of the page's text leaves the Heatmap's ⏎ and ⇥ marks out.
  useEffect(() => {
    document.addEventListener("copy", leaveMarksOut);
    return () => document.removeEventListener("copy", leaveMarksOut);
  }, []);

  // A new Playground starts on a Warm model, else the default one.
  useEffect(() => {
    if (!models || !models.length || view.list[0].model) return;
    // Every model still without one (Compare may have copied the first before this answer came).
    startingModel(models).then((id) => setView((old) => (old.list.every((settings) => settings.model) ? old : {
      ...old, list: old.list.map((settings) => (settings.model ? settings : { ...settings, model: id })),
    })));
  }, [models]);

  // The address holds the settings (never the prompt); Playground in the navigation opens it again.
  useEffect(() => {
    if (!view.list[0].model) return;
    const address = addressOf(view);
    written.current = address;
    const here = `${location.pathname}${location.search}`;
    if (here !== url(address)) history.replaceState(null, "", url(address));
    rememberAddress(address);
  }, [view]);
  // The navigation's Playground (or Back) opened another address: its settings replace these.
  useEffect(() => {
    const address = `/playground${location.search}`;
    if (written.current && address !== written.current) {
      const next = readAddress(route.query);
      if (next.models.length) {
        setView({ list: next.models, compare: next.compare, heatmap: next.heatmap });
        setFaults({});
      }
    }
  }, [route.key]);

  // The Runs: the list, then the newest Run (or its comparison) above the table.
  useEffect(() => {
    let live = true;
    loadRuns().then((data) => {
      if (!live || !data || !data.length) return;
      setSlots((old) => {
        if (old) return old;
        const newest = data[0];
        const group = newest.group_id ? data.filter((r) => r.group_id === newest.group_id).sort((a, b) => a.number - b.number) : [newest];
        return group.map((run) => ({ id: run.id }));
      });
    });
    const timer = setInterval(loadRuns, LIST_EVERY_MS);
    return () => { live = false; clearInterval(timer); };
  }, []);

  const byId = runsState.byId;
  const shownIds = (slots || []).filter((slot) => slot.id).map((slot) => slot.id);
  // A shown Run needs its log probabilities: the list leaves them out.
  useEffect(() => {
    for (const id of shownIds) {
      if (byId[id] && !runsState.full.has(id)) readRun(id).then((doc) => merge([doc])).catch(() => {});
    }
  }, [shownIds.join(","), runsState.order]);

  const growingIds = (runsState.order || []).filter((id) => byId[id] && GROWING.has(byId[id].status));
  useFollow(growingIds, (doc) => merge([doc]), (error, status) => (status === 404 ? loadRuns() : setRunError(error)));

  // The model-start line: while a shown Run waits, how far its model's start has got.
  const waiting = [...new Set(shownIds.map((id) => byId[id]).filter((run) => run && GROWING.has(run.status)
    && !(run.choices || []).some((c) => c.text)).map((run) => run.model))];
  useEffect(() => {
    if (!waiting.length) return undefined;
    let live = true;
    const read = () => Promise.all(waiting.map((id) => modelStatus(id).then((s) => [id, s]).catch(() => [id, null])))
      .then((pairs) => live && setStatuses(Object.fromEntries(pairs)));
    read();
    const timer = setInterval(read, STATUS_EVERY_MS);
    return () => { live = false; clearInterval(timer); };
  }, [waiting.join(",")]);

  const shownRuns = shownIds.map((id) => byId[id]).filter(Boolean);
  const anyGrowing = shownRuns.some((run) => GROWING.has(run.status));

  function setSettings(index, settings) {
    setView((old) => {
      const next = [...old.list];
      next[index] = settings;
      return { ...old, list: next };
    });
  }

  function focusFirstError() {
    requestAnimationFrame(() => {
      const found = document.querySelector(".playground .field-invalid input, .playground .field-invalid textarea, .playground .field-invalid select, .playground .steer.field-invalid input");
      if (found) {
        found.focus({ preventScroll: true });
        found.scrollIntoView({ block: "nearest" });
      }
    });
  }

  async function start(requests, settingsList) {
    setBusy(true);
    setRunError(null);
    try {
      const answer = await startRuns(requests);
      merge(answer.runs);
      const refusedAt = new Map(answer.refused.map((r) => [r.index, r]));
      const started = [...answer.runs];
      setSlots(requests.map((request, i) => (refusedAt.has(i)
        ? { refusal: { ...refusedAt.get(i), model: request.model } } : { id: started.shift().id })));
      const nextFaults = {};
      answer.refused.forEach((r) => {
        const fault = settingsList ? faultOf(settingsList[r.index], r.error) : null;
        if (fault) nextFaults[r.index] = fault;
      });
      setFaults(nextFaults);
      if (answer.refused.length && settingsList && settingsList.length === 1 && nextFaults[0]) focusFirstError();
      loadRuns();
    } catch (failure) {
      setRunError({ message: failure.message, code: failure.code });
    } finally {
      setBusy(false);
    }
  }

  function run() {
    if (!prompt) {
      setPromptError("Write the prompt first.");
      requestAnimationFrame(() => document.getElementById("prompt")?.focus());
      return;
    }
    const bad = errors.findIndex((e) => Object.keys(e).length > 0);
    if (bad >= 0) {
      if (view.compare) setActive(bad);
      focusFirstError();
      return;
    }
    start(list.map((settings) => requestOf(settings, prompt, limitsOf(models, settings.model))), list);
  }

  async function stop() {
    setRunError(null);
    const growing = shownRuns.filter((run) => GROWING.has(run.status));
    const groups = new Set(growing.map((run) => run.group_id));
    try {
      if (growing.length > 1 && groups.size === 1 && !groups.has(null)) {
        merge((await stopGroup(growing[0].group_id)).data);
      } else {
        merge(await Promise.all(growing.map((run) => stopRun(run.id))));
      }
    } catch (failure) {
      setRunError({ message: failure.message });
    }
  }

  async function stopOne(run) {
    try {
      merge([await stopRun(run.id)]);
    } catch (failure) {
      setRunError({ message: failure.message });
    }
  }

  function runOn(run, choiceIndex, tokenIndex, token) {
    const tokens = tokensOf(run.choices[choiceIndex]);
    const before = tokens.slice(0, tokenIndex).map((t) => t.token).join("");
    const base = run.request.echo ? "" : promptText(run.request);
    const { prompt: _, ...rest } = run.request;
    start([{ ...rest, prompt: base + before + token }], null);
  }

  function setCompare(compare) {
    if (compare === view.compare) return;
    setFaults({});
    if (compare) {
      // Compare starts with a copy of the one model.
      setView((old) => ({ ...old, compare: true, list: old.list.length > 1 ? old.list : [old.list[0], { ...old.list[0] }] }));
      setActive(0);
    } else {
      setView((old) => ({ ...old, compare: false, list: [old.list[editing], ...old.list.filter((_, i) => i !== editing)] }));
      setActive(0);
    }
  }

  const actions = {
    show: (run) => {
      setSlots([{ id: run.id }]);
      requestAnimationFrame(() => outputRef.current?.scrollIntoView({ block: "start" }));
    },
    use: (run) => {
      setSettings(editing, settingsOf(run.request));
      setFaults({});
      if (typeof run.request.prompt === "string") setPrompt(run.request.prompt);
      setSlots([{ id: run.id }]);
    },
    copy: (text, what) => copy(text, what),
    curl: (run) => copy(curlOf(run.request, `${location.origin}${ROOT}`), "the API request"),
    remove: (run) => setDeleting(run),
    compare: (ids) => setSlots(ids.map((id) => byId[id]).filter(Boolean).sort((a, b) => a.number - b.number).map((run) => ({ id: run.id }))),
    restore: (members) => {
      // "with its seed": the seed the Run sampled with, also where its request left Seed blank.
      setView((old) => ({ ...old, compare: true, list: members.map((run) => settingsOf({ ...run.request, seed: run.request.seed ?? run.seed })) }));
      setActive(0);
      setFaults({});
      if (typeof members[0].request.prompt === "string") setPrompt(members[0].request.prompt);
      setSlots(members.map((run) => ({ id: run.id })));
    },
  };

  async function confirmDelete(run) {
    await deleteRun(run.id);
    forget(run.id);
    setSlots((old) => (old ? old.filter((slot) => slot.id !== run.id) : old));
    setChosen((old) => { const next = new Set(old); next.delete(run.id); return next; });
    setDeleting(null);
  }

  const slotRuns = (slots || []).map((slot) => (slot.id ? byId[slot.id] : null));
  const startedRuns = slotRuns.filter(Boolean);
  const diffs = startedRuns.length > 1 ? differences(startedRuns.map((run) => run.request)) : [];
  const firstRun = startedRuns[0];
  const current = requestOf(list[editing], prompt, limitsOf(models, list[editing].model));
  const panel = html`<${SettingsPanel} title=${view.compare ? `Settings of model ${editing + 1}` : "Settings"}
    settings=${list[editing]} errors=${errors[editing]} models=${models || []} limits=${limitsOf(models, list[editing].model)}
    heatmap=${view.heatmap} onHeatmap=${(heatmap) => setView((old) => ({ ...old, heatmap }))}
    onChange=${(settings) => setSettings(editing, settings)}
    onReset=${() => { setSettings(editing, { ...defaults(list[editing].model) }); setFaults((old) => ({ ...old, [editing]: null })); }}
    onClose=${() => { setSettingsClosed(true); settingsPanel.set(true); }} />`;

  const mode = html`<div class="segmented" role="group" aria-label="Single or Compare">
    <button type="button" aria-pressed=${view.compare ? "false" : "true"} onClick=${() => setCompare(false)}>Single</button>
    <button type="button" aria-pressed=${view.compare ? "true" : "false"} onClick=${() => setCompare(true)}>Compare</button>
  </div>`;
  const exportable = startedRuns.map((run) => run.id);
  return html`<${PageHeader} title="Playground">${mode}</${PageHeader}>
    <div class=${`playground${settingsClosed ? " settings-closed" : ""}`}>
      <div class="play-main">
        <${PromptBox} value=${prompt} onInput=${setPrompt} error=${promptError} />
        ${view.compare ? html`<${ModelsList} models=${models} list=${list} active=${editing} errors=${errors}
          onChange=${(i) => { setActive(i); setSettingsClosed(false); settingsPanel.set(false); }}
          onDuplicate=${(i) => setView((old) => ({ ...old, list: [...old.list.slice(0, i + 1), { ...old.list[i] }, ...old.list.slice(i + 1)] }))}
          onRemove=${(i) => { setView((old) => ({ ...old, list: old.list.filter((_, j) => j !== i) })); setActive(0); setFaults({}); }}
          onAdd=${() => { setView((old) => ({ ...old, list: [...old.list, defaults(old.list[0].model)] })); setActive(list.length); }} />` : null}
        <div class="play-actions">
          <button type="button" class="primary" disabled=${busy || !list[0].model} onClick=${run}>${view.compare ? "Run all" : "Run"}</button>
          ${anyGrowing ? html`<button type="button" onClick=${stop}>${view.compare || shownRuns.length > 1 ? "Stop all" : "Stop"}</button>` : null}
          ${settingsClosed ? html`<button type="button" onClick=${() => { setSettingsClosed(false); settingsPanel.set(false); }}>Show the settings</button>` : null}
          <span class="status-line" role="status">${copyStatus}</span>
        </div>
        ${runError ? html`<p class="form-error" role="alert">${runError.message}</p>` : null}
        <section class="output" ref=${outputRef} aria-labelledby="output-title">
          <div class="output-head">
            <h2 id="output-title">Output</h2>
            ${exportable.length ? html`<${Menu} label="Export" title="Export the Runs in view" items=${exportItems(exportable)} />` : null}
            ${view.heatmap && startedRuns.some(asksLogprobs) ? html`<${Legend} />` : null}
          </div>
          ${slots && slots.length ? html`<div class=${`run-grid${slots.length > 1 ? " run-grid-many" : ""}`}>
            ${slots.map((slot, i) => {
              if (slot.refusal) return html`<${RefusedView} key=${`refused-${i}`} refusal=${slot.refusal} index=${i} single=${slots.length === 1}
                model=${(models || []).find((m) => m.id === slot.refusal.model)} />`;
              const doc = byId[slot.id];
              if (!doc) return null;
              const k = startedRuns.indexOf(doc);
              const samePrompt = firstRun && doc !== firstRun && JSON.stringify(doc.request.prompt) === JSON.stringify(firstRun.request.prompt);
              const count = samePrompt ? matching(firstRun, doc) : null;
              const model = (models || []).find((m) => m.id === doc.model);
              return html`<${RunView} key=${doc.id} run=${doc} model=${model} heatmap=${view.heatmap} busy=${busy}
                differs=${k >= 0 ? diffs[k] : null} match=${count === null ? null : { count, of: firstRun.number }}
                changes=${!view.compare && startedRuns.length === 1 ? changesFrom(doc.request, current) : null}
                startLine=${startLine(model, statuses[doc.model])}
                onStop=${slots.length > 1 ? stopOne : null} onCopy=${copy} onRunOn=${runOn} prompt=${prompt} />`;
            })}
          </div>` : html`<p class="muted output-empty">Select ${view.compare ? "Run all" : "Run"} to see the text here as it grows.</p>`}
        </section>
      </div>
      ${settingsClosed ? null : html`<aside class="play-settings" aria-label="Settings">${panel}</aside>`}
    </div>
    <${RunsTable} runs=${runsState.order ? runsState.order.map((id) => byId[id]) : null} models=${models || []}
      chosen=${chosen} shownIds=${shownIds} actions=${actions} restoreBusy=${anyGrowing} failed=${runsState.failed}
      onChoose=${(id, on) => setChosen((old) => { const next = new Set(old); if (on) next.add(id); else next.delete(id); return next; })} />
    <${DeleteDialog} run=${deleting} onDelete=${confirmDelete} onClose=${() => setDeleting(null)} />
    ${copyDialog}`;
}
