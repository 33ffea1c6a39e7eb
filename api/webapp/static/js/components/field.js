// Form fields with a <label>, an optional hint, and the error under the field.
import { useRef } from "preact/hooks";
import { html } from "../html.js";

let next = 0;
function useId(prefix) {
  return useRef(`${prefix}-${++next}`).current;
}

export function Field({ label, value, onInput, error, hint, optional, multiline, type = "text", ...rest }) {
  const id = useId("field");
  const described = [hint ? `${id}-hint` : null, error ? `${id}-error` : null].filter(Boolean).join(" ") || undefined;
  const common = {
    id, value, "aria-invalid": error ? "true" : undefined, "aria-describedby": described,
    onInput: (event) => onInput(event.currentTarget.value), ...rest,
  };
  return html`<div class=${`field${error ? " field-invalid" : ""}`}>
    <label for=${id}>${label}${optional ? html` <span class="optional">(optional)</span>` : null}</label>
    ${hint ? html`<p class="hint" id=${`${id}-hint`}>${hint}</p>` : null}
    ${multiline ? html`<textarea rows="3" ...${common}></textarea>` : html`<input type=${type} ...${common} />`}
    ${error ? html`<p class="field-error" id=${`${id}-error`}>${error}</p>` : null}
  </div>`;
}

export function Checkbox({ label, checked, onChange, error, ...rest }) {
  const id = useId("check");
  return html`<div class=${`field field-check${error ? " field-invalid" : ""}`}>
    <input type="checkbox" id=${id} checked=${checked} aria-invalid=${error ? "true" : undefined}
      aria-describedby=${error ? `${id}-error` : undefined} onChange=${(event) => onChange(event.currentTarget.checked)} ...${rest} />
    <label for=${id}>${label}</label>
    ${error ? html`<p class="field-error" id=${`${id}-error`}>${error}</p>` : null}
  </div>`;
}

/** The error of a failed call: under its field when it names one, else above the button. */
export function splitError(error, fields) {
  if (!error) return { field: {}, form: null };
  if (error.param && fields.includes(error.param)) return { field: { [error.param]: error.message }, form: null };
  return { field: {}, form: error.message };
}

/** The form's message; it takes the focus after a failed submit (components/form.js). */
export function FormError({ message }) {
  return message ? html`<p class="form-error" role="alert" tabindex="-1">${message}</p>` : null;
}
