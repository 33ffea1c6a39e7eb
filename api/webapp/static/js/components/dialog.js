// A modal <dialog>, in the page only while open: labelled by its title, the
// focus moved in when it opens and given back to the opener when it closes.
import { useLayoutEffect, useRef } from "preact/hooks";
import { html } from "../html.js";

let next = 0;

function DialogBox({ title, onCancel, children, className }) {
  const ref = useRef(null);
  const titleId = useRef(`dialog-title-${++next}`).current;
  useLayoutEffect(() => {
    const opener = document.activeElement;
    const dialog = ref.current;
    dialog.showModal();
    const first = dialog.querySelector("[autofocus], input, textarea, select, button:not([disabled])");
    if (first) first.focus();
    return () => {
      if (dialog.open) dialog.close();
      if (opener && opener.isConnected && typeof opener.focus === "function") opener.focus();
    };
  }, []);
  function cancel(event) {
    // Escape: the page decides (Copy your key asks first when the key was not copied).
    event.preventDefault();
    if (onCancel) onCancel();
  }
  return html`<dialog ref=${ref} class=${`dialog ${className}`} aria-labelledby=${titleId} onCancel=${cancel}>
    <h2 id=${titleId} class="dialog-title">${title}</h2>
    ${children}
  </dialog>`;
}

export function Dialog({ open, class: className = "", ...rest }) {
  return open ? html`<${DialogBox} className=${className} ...${rest} />` : null;
}
