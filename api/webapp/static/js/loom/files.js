// Files of the Loom page (spec: "Export and import"): a download made in the browser (the Loom
// file of the export route, a path as text), and New Loom's two ways to start: a Prompt (Tab in
// the empty box puts in the gray example) with Start the Loom, or Import a Loom from a Loom file,
// which names the new Loom "<title> (imported)"; a file that is no Loom file gets the API's words.
import { useRef, useState } from "preact/hooks";
import { html } from "../html.js";
import { FormError } from "../components/field.js";
import { EXAMPLE } from "../playground/form.js";
import { createLoom, importLoom } from "./api.js";

export function download(name, text, type = "text/plain") {
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([text], { type }));
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}

/** loom-<title>.json, the title without the characters that a file name cannot hold. */
export function exportName(title) {
  const safe = (title || "").replace(/[\\/:*?"<>|\u0000-\u001f]+/g, "-").trim();
  return `loom-${safe || "untitled"}.json`;
}

export function NewLoom({ onStarted, onCancel }) {
  const [prompt, setPrompt] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [importError, setImportError] = useState(null);
  const [importing, setImporting] = useState(false);
  const fileRef = useRef(null);

  async function start(event) {
    event.preventDefault();
    if (!prompt) {
      setError("Write the prompt first.");
      document.getElementById("loom-prompt")?.focus();
      return;
    }
    setBusy(true);
    setError(null);
    try {
      onStarted(await createLoom(prompt));
    } catch (failure) {
      setError(failure.message);
    } finally {
      setBusy(false);
    }
  }

  async function importFile(event) {
    event.preventDefault();
    const file = fileRef.current && fileRef.current.files[0];
    if (!file) {
      setImportError("Choose a Loom file first.");
      return;
    }
    setImporting(true);
    setImportError(null);
    try {
      let body;
      try {
        body = JSON.parse(await file.text());
      } catch {
        setImportError(`${file.name} is not a Loom file: it is not JSON.`);
        return;
      }
      onStarted(await importLoom(body));
    } catch (failure) {
      setImportError(failure.message);
    } finally {
      setImporting(false);
    }
  }

  function onKey(event) {
    // Tab in an empty box puts in the gray example; the next Tab moves on.
    if (event.key === "Tab" && !event.shiftKey && !event.currentTarget.value) {
      event.preventDefault();
      setPrompt(EXAMPLE);
    }
  }

  return html`<section class="new-loom" aria-labelledby="new-loom-title">
    <h2 id="new-loom-title">New Loom</h2>
    <form onSubmit=${start} noValidate>
      <div class=${`field prompt-field${error ? " field-invalid" : ""}`}>
        <label for="loom-prompt">Prompt</label>
        <textarea id="loom-prompt" rows="6" value=${prompt} placeholder=${EXAMPLE} spellcheck="false"
          aria-describedby="loom-prompt-hint" aria-invalid=${error ? "true" : undefined}
          onInput=${(event) => { setPrompt(event.currentTarget.value); setError(null); }} onKeyDown=${onKey}></textarea>
        <p class="hint" id="loom-prompt-hint">In an empty box, Tab puts in the gray example. The prompt becomes the first Node, the root.</p>
      </div>
      <${FormError} message=${error} />
      <div class="actions">
        <button type="submit" class="primary" disabled=${busy}>Start the Loom</button>
        ${onCancel ? html`<button type="button" onClick=${onCancel}>Cancel</button>` : null}
      </div>
    </form>
    <form class="import-loom" onSubmit=${importFile} noValidate aria-labelledby="import-loom-title">
      <h3 id="import-loom-title">Import a Loom</h3>
      <div class=${`field${importError ? " field-invalid" : ""}`}>
        <label for="loom-file">Loom file</label>
        <input type="file" id="loom-file" ref=${fileRef} accept=".json,application/json"
          aria-describedby="loom-file-hint" onChange=${() => setImportError(null)} />
        <p class="hint" id="loom-file-hint">A file that Export wrote, or a Loom file of the old platform.</p>
      </div>
      <${FormError} message=${importError} />
      <div class="actions"><button type="submit" disabled=${importing}>Import</button></div>
    </form>
  </section>`;
}
