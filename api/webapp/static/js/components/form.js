// Every form of the App: after a submit that failed, the User is taken to what failed, the
// first field in error (its input, or a group's first choice) or else the form's error
// message, focused and scrolled into view; never left on the button with the error off screen.
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "../html.js";

const IN_ERROR = ".field-invalid, .form-error";
const FOCUSABLE = "input:not([type=hidden]):not([hidden]):not([disabled]), textarea:not([disabled]), select:not([disabled])";

/** The first error of the form: what to focus, and what to bring into view (the whole field,
 * its label and its message with it); null when the form shows none. */
export function firstError(form) {
  const found = form && form.querySelector(IN_ERROR);
  if (!found) return null;
  const control = found.matches(".form-error") ? null : found.querySelector(FOCUSABLE);
  return { focus: control || found, view: found };
}

/** Focus the form's first error and scroll it into view; whether there was one. */
export function showFirstError(form) {
  const error = firstError(form);
  if (!error) return false;
  // A message is no control: tabindex -1 lets it take the focus (FormError sets it).
  if (!error.focus.matches(FOCUSABLE) && !error.focus.hasAttribute("tabindex")) error.focus.setAttribute("tabindex", "-1");
  error.focus.focus({ preventScroll: true });
  // "nearest" with the fields' scroll-margin (app.css): clear of the sticky top bar, and no jump
  // when the error is in view already.
  error.view.scrollIntoView({ block: "nearest", inline: "nearest" });
  return true;
}

/** <form noValidate> whose onSubmit (sync or async, given the event, its default prevented) shows
 * its errors; once it is done and the page has drawn them, the first one gets the focus. */
export function Form({ onSubmit, children, ...rest }) {
  const ref = useRef(null);
  const [submits, setSubmits] = useState(0);
  useEffect(() => {
    if (submits) showFirstError(ref.current);
  }, [submits]);
  async function submit(event) {
    event.preventDefault();
    try {
      await onSubmit(event);
    } finally {
      setSubmits((count) => count + 1);
    }
  }
  return html`<form ref=${ref} noValidate onSubmit=${submit} ...${rest}>${children}</form>`;
}

/** A dialog's submit: busy while `action` runs, and its error (for splitError) when it fails. */
export function useSubmit(action) {
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  async function submit() {
    setBusy(true);
    setError(null);
    try {
      await action();
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }
  return { error, busy, submit, reset: () => setError(null) };
}
