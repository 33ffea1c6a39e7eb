// Your Looms (spec: "Open or start a Loom"): up to 100 Looms, the pinned ones first, then the
// others by their last change, as the API lists them; each row opens its Loom, and its menu has
// Pin (or Unpin), Rename and Delete. Selecting the heading folds the list, and the next Loom page
// shows it as it was left (localStorage, so every tab and the next visit agree).
import { useState } from "preact/hooks";
import { html } from "../html.js";
import { Menu } from "../components/menu.js";

const FOLDED = "acs-loom-list-folded";

export const titleOf = (loom) => (loom && loom.title) || "Untitled Loom";

export function useFolded() {
  const [folded, setFolded] = useState(() => localStorage.getItem(FOLDED) === "1");
  const toggle = () => setFolded((value) => {
    localStorage.setItem(FOLDED, value ? "0" : "1");
    return !value;
  });
  return [folded, toggle];
}

export function LoomsList({ looms, openId, failed, onOpen, onPin, onRename, onDelete }) {
  const [folded, toggle] = useFolded();
  return html`<section class="looms-list" aria-labelledby="looms-list-title">
    <h2 class="looms-list-head" id="looms-list-title">
      <button type="button" class="looms-fold" aria-expanded=${folded ? "false" : "true"} aria-controls="looms-list-rows" onClick=${toggle}>
        <span class="fold-mark" aria-hidden="true">${folded ? "▸" : "▾"}</span>Your Looms
      </button>
    </h2>
    <div id="looms-list-rows" hidden=${folded}>
      ${failed ? html`<p class="form-error" role="alert">Could not read your Looms. The page tries again.</p>` : null}
      ${looms === null ? html`<p class="muted">Loading…</p>`
        : looms.length === 0 ? html`<p class="muted">No Looms yet.</p>`
        : html`<ul class="looms-rows">
          ${looms.map((loom) => html`<li key=${loom.id} class=${`looms-row${loom.id === openId ? " looms-row-open" : ""}`}>
            <a href=${`loom?loom=${loom.id}`} class="looms-open" title=${titleOf(loom)}
              aria-current=${loom.id === openId ? "page" : undefined}
              onClick=${(event) => { if (event.button === 0 && !event.metaKey && !event.ctrlKey && !event.shiftKey) { event.preventDefault(); onOpen(loom.id); } }}>
              ${loom.pinned ? html`<span class="pin-mark" aria-label="Pinned" role="img"><svg viewBox="0 0 16 16" width="14" height="14" aria-hidden="true" focusable="false">
                <path fill="currentColor" d="M9.8 1.2l5 5-1.4 1.4-.9-.9-2.7 2.7.4 3.3-1.4 1.4L6 10.4 2.4 14 2 13.6 5.6 10 2.9 7.3l1.4-1.4 3.3.4 2.7-2.7-.9-.9z" /></svg></span>` : null}
              <span class="cut">${titleOf(loom)}</span>
            </a>
            <${Menu} label="⋯" ariaLabel=${`Actions of ${titleOf(loom)}`} floating=${true} class="looms-row-menu" items=${[
              { label: loom.pinned ? "Unpin" : "Pin", onSelect: () => onPin(loom, !loom.pinned) },
              { label: "Rename", onSelect: () => onRename(loom) },
              { label: "Delete", danger: true, onSelect: () => onDelete(loom) },
            ]} />
          </li>`)}
        </ul>`}
    </div>
  </section>`;
}
