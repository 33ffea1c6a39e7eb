// A menu button: Enter, Space or ArrowDown opens it on its first item; the
// arrows, Home and End move; Escape closes it and gives the focus back.
// A `floating` menu (a table row's) is placed by the viewport, so that the
// table's scrolling box does not clip it.
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { html } from "../html.js";
import { linkClick } from "../router.js";

let next = 0;

export function Menu({ label, ariaLabel, title, items, class: className = "", align = "end", floating = false }) {
  const [open, setOpen] = useState(false);
  const button = useRef(null);
  const list = useRef(null);
  const id = useRef(`menu-${++next}`).current;
  const start = useRef(0);

  const entries = () => (list.current ? [...list.current.querySelectorAll("[role=menuitem]")] : []);
  const focusItem = (index) => {
    const all = entries();
    // A floating menu is in view already: no scroll to the item.
    if (all.length) all[(index + all.length) % all.length].focus({ preventScroll: floating });
  };
  useLayoutEffect(() => {
    if (!open) return;
    if (floating) place(button.current, list.current);
    focusItem(start.current);
  }, [open]);
  useEffect(() => {
    if (!open || !floating) return;
    // The button moves with a scroll or a resize: the list follows it.
    const follow = () => place(button.current, list.current);
    window.addEventListener("scroll", follow, true);
    window.addEventListener("resize", follow);
    return () => { window.removeEventListener("scroll", follow, true); window.removeEventListener("resize", follow); };
  }, [open]);
  useEffect(() => {
    if (!open) return;
    const outside = (event) => {
      if (!button.current?.parentElement?.contains(event.target)) setOpen(false);
    };
    document.addEventListener("pointerdown", outside);
    return () => document.removeEventListener("pointerdown", outside);
  }, [open]);

  function show(first) {
    start.current = first ? 0 : -1;
    setOpen(true);
  }
  function close(refocus = true) {
    setOpen(false);
    if (refocus) button.current?.focus();
  }
  function onButtonKey(event) {
    if (["ArrowDown", "Enter", " "].includes(event.key)) { event.preventDefault(); show(true); }
    else if (event.key === "ArrowUp") { event.preventDefault(); show(false); }
  }
  function onListKey(event) {
    const all = entries();
    const at = all.indexOf(document.activeElement);
    const moves = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: all.length - 1 };
    if (event.key in moves) { event.preventDefault(); focusItem(moves[event.key]); }
    else if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); close(); }
    else if (event.key === "Tab") close(false);
  }
  function choose(item, event) {
    close(!item.href);
    if (item.to) linkClick(event);
    if (item.onSelect) item.onSelect();
  }
  const shown = items.filter(Boolean);
  return html`<div class=${`menu ${className}`}>
    <button type="button" ref=${button} class="menu-button" aria-haspopup="menu" aria-expanded=${open ? "true" : "false"}
      aria-controls=${id} aria-label=${ariaLabel} title=${title} onClick=${() => (open ? close() : show(true))} onKeyDown=${onButtonKey}>
      ${label}
    </button>
    <ul id=${id} ref=${list} role="menu" class=${`menu-list menu-${align}${floating ? " menu-floating" : ""}`} hidden=${!open} onKeyDown=${onListKey}
      aria-label=${ariaLabel || (typeof label === "string" ? label : undefined)}>
      ${shown.map((item) => html`<li role="none">${item.href || item.to
        ? html`<a role="menuitem" tabindex="-1" href=${item.to ? item.to.replace(/^\//, "") : item.href}
            target=${item.external ? "_blank" : undefined} rel=${item.external ? "noopener" : undefined}
            onClick=${(event) => choose(item, event)}>${item.label}</a>`
        : html`<button type="button" role="menuitem" tabindex="-1" class=${item.danger ? "danger" : ""}
            onClick=${(event) => choose(item, event)}>${item.label}</button>`}</li>`)}
    </ul>
  </div>`;
}

// Below the button, its end edge at the button's (or its start edge, for
// align "start"); above it when the viewport has no room below.
function place(button, list) {
  const at = button.getBoundingClientRect();
  const height = list.offsetHeight;
  const width = list.offsetWidth;
  const below = at.bottom + 4;
  const top = below + height > window.innerHeight && at.top - height - 4 >= 0 ? at.top - height - 4 : below;
  const left = Math.max(4, Math.min(list.classList.contains("menu-start") ? at.left : at.right - width,
                                    window.innerWidth - width - 4));
  Object.assign(list.style, { top: `${top}px`, left: `${left}px` });
}
