// Copy to the clipboard; where the browser does not let the App copy (a page over plain HTTP),
// the App shows the text selected, to copy by hand (spec: "Copy ... When the browser does not let
// the App copy, the App shows the text selected. Copy it by hand.").
import { useLayoutEffect, useRef, useState } from "preact/hooks";
import { html } from "../html.js";
import { Dialog } from "./dialog.js";

export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

/** [copy(text, what), the dialog to render, the last status line]: copy(text) copies, or opens the
 * dialog with the text selected. */
export function useCopy() {
  const [manual, setManual] = useState(null);
  const [status, setStatus] = useState("");
  const timer = useRef(null);
  async function copy(text, what = "the text") {
    if (await copyText(text)) {
      setStatus(`Copied ${what}.`);
      // The line says what the last Copy did, for a while.
      clearTimeout(timer.current);
      timer.current = setTimeout(() => setStatus(""), 6000);
      return true;
    }
    setManual(text);
    setStatus("");
    return false;
  }
  const dialog = html`<${ManualCopy} text=${manual} onClose=${() => setManual(null)} />`;
  return [copy, dialog, status];
}

function ManualCopy({ text, onClose }) {
  const area = useRef(null);
  useLayoutEffect(() => {
    if (text !== null && area.current) {
      area.current.focus();
      area.current.select();
    }
  }, [text]);
  return html`<${Dialog} open=${text !== null} title="Copy by hand" onCancel=${onClose}>
    <p>The browser did not let the App copy. The text is selected: copy it by hand.</p>
    <div class="field">
      <label for="manual-copy">The text to copy</label>
      <textarea id="manual-copy" ref=${area} class="mono" rows="8" readonly value=${text || ""}></textarea>
    </div>
    <div class="actions actions-end"><button type="button" class="primary" onClick=${onClose}>Done</button></div>
  </${Dialog}>`;
}
