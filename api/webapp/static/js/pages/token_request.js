// Request more tokens: the form, and Your requests with their answers.
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { Field, FormError, splitError } from "../components/field.js";
import { Form } from "../components/form.js";
import { compact, day } from "../components/format.js";
import { Link } from "../components/link.js";
import { shortName } from "../components/model_name.js";
import { PageHeader } from "../notice.js";

const EMPTY = { tokens: "", models: [], project: "", planned_usage: "", how_you_got_the_number: "", results: "", links: "", when_needed: "" };
const FIELDS = Object.keys(EMPTY);
const OPTIONAL = ["how_you_got_the_number", "results", "links", "when_needed"];
const TOKENS = /^\s*\d+(\.\d+)?\s*[KMB]?\s*$/i;
const REQUIRED = {
  project: "Write the project that needs the tokens.",
  planned_usage: "Write how you plan to use the tokens.",
};
// The API's words when it refuses a second request (409 token_request_waiting), said before the form.
const WAITING = "You have a request waiting. Once an admin decides it, you can ask again.";
const STATUS = { waiting: "Waiting", approved: "Approved", rejected: "Rejected" };

function check(form) {
  const errors = {};
  if (!TOKENS.test(form.tokens)) errors.tokens = "Write the tokens as a number, such as 50K or 2.5M.";
  if (!form.models.length) errors.models = "Choose each model that the work needs.";
  for (const [name, message] of Object.entries(REQUIRED)) if (!form[name].trim()) errors[name] = message;
  return errors;
}

function Models({ models, chosen, onChange, error }) {
  const toggle = (id, on) => onChange(on ? [...chosen, id] : chosen.filter((m) => m !== id));
  return html`<fieldset class=${`field checks${error ? " field-invalid" : ""}`} aria-describedby=${error ? "models-error" : undefined}>
    <legend>Models</legend>
    ${models.length ? models.map((m) => html`<div class="field-check">
      <input type="checkbox" id=${`model-${m.id}`} checked=${chosen.includes(m.id)} onChange=${(e) => toggle(m.id, e.currentTarget.checked)} />
      <label for=${`model-${m.id}`} title=${m.id}>${shortName(m)}</label>
    </div>`) : html`<p class="hint">Loading the models…</p>`}
    ${error ? html`<p class="field-error" id="models-error">${error}</p>` : null}
  </fieldset>`;
}

function Requests({ requests }) {
  if (!requests) return html`<p role="status">Loading…</p>`;
  if (!requests.length) return html`<p>You have sent no requests yet.</p>`;
  return html`<div class="table-scroll" tabindex="0" role="region" aria-label="Table of your requests"><table class="table requests-table">
    <caption class="visually-hidden">Your requests</caption>
    <thead><tr><th scope="col">Sent</th><th scope="col" class="num">Tokens</th><th scope="col">Status</th><th scope="col" class="wide">Note</th></tr></thead>
    <tbody>${requests.map((r) => {
      const other = r.status === "approved" && r.granted !== null && r.granted !== undefined && r.granted !== r.tokens;
      return html`<tr>
        <td class="nowrap">${day(r.created_at)}</td>
        <td class="num nowrap">${other ? `${compact(r.granted)} of ${compact(r.tokens)}` : compact(r.tokens)}</td>
        <td><span class=${`badge badge-${r.status}`}>${STATUS[r.status] || r.status}</span>
          ${r.note ? html`<span class="phone-only note-under">${r.note}</span>` : null}</td>
        <td class="wide">${r.note || ""}</td>
      </tr>`;
    })}</tbody>
  </table></div>`;
}

export default function TokenRequest() {
  const [form, setForm] = useState(EMPTY);
  const [models, setModels] = useState([]);
  const [requests, setRequests] = useState(null);
  const [errors, setErrors] = useState({});
  const [formError, setFormError] = useState(null);
  const [sent, setSent] = useState(false);
  const [busy, setBusy] = useState(false);
  const set = (name) => (value) => { setSent(false); setForm((old) => ({ ...old, [name]: value })); };
  const loadRequests = () => api("account/token-requests").then((answer) => setRequests(answer.data)).catch(() => setRequests((old) => old || []));

  useEffect(() => {
    api("account/models").then((answer) => setModels(answer.data)).catch(() => {});
    loadRequests();
  }, []);

  async function submit(event) {
    event.preventDefault();
    setFormError(null);
    const found = check(form);
    setErrors(found);
    if (Object.keys(found).length) return;
    setBusy(true);
    try {
      const body = { tokens: form.tokens.trim(), models: form.models, project: form.project, planned_usage: form.planned_usage };
      for (const name of OPTIONAL) if (form[name].trim()) body[name] = form[name];
      await api("account/token-requests", { method: "POST", body });
      setForm(EMPTY);
      setSent(true);
      loadRequests();
    } catch (failure) {
      const split = splitError(failure, FIELDS);
      setErrors(split.field);
      setFormError(split.form);
    } finally {
      setBusy(false);
    }
  }

  // One request waits at a time: the page says so before the User fills in the form, not after.
  const waiting = Boolean(requests && requests.some((r) => r.status === "waiting"));
  return html`<${PageHeader} title="Request more tokens" />
    ${waiting ? html`<p class="info" id="request-waiting" role="status">${WAITING}</p>` : null}
    <div class="two-columns">
      <section class="panel" aria-labelledby="request-form-title">
        <h2 id="request-form-title" class="visually-hidden">Your request</h2>
        <p>An admin decides from your answers. An approval is a Grant to your Budget. <${Link} to="/usage">Usage</${Link}> shows what you have left.</p>
        <${Form} onSubmit=${submit}>
          <${Field} label="Tokens" required value=${form.tokens} onInput=${set("tokens")} hint="A number, such as 50K or 2.5M."
            error=${errors.tokens} autocomplete="off" />
          <${Models} models=${models} chosen=${form.models} onChange=${set("models")} error=${errors.models} />
          <${Field} label="Project" required value=${form.project} onInput=${set("project")} error=${errors.project} />
          <${Field} label="Planned usage" multiline required value=${form.planned_usage} onInput=${set("planned_usage")} error=${errors.planned_usage} />
          <${Field} label="How you got the number" optional multiline value=${form.how_you_got_the_number}
            onInput=${set("how_you_got_the_number")} error=${errors.how_you_got_the_number} />
          <${Field} label="Results" optional multiline value=${form.results} onInput=${set("results")} error=${errors.results} />
          <${Field} label="Links" optional multiline value=${form.links} onInput=${set("links")} error=${errors.links} />
          <${Field} label="When you need them" optional value=${form.when_needed} onInput=${set("when_needed")} error=${errors.when_needed} />
          <${FormError} message=${formError} />
          <div class="actions">
            <button type="submit" class="primary" disabled=${busy || waiting}
              aria-describedby=${waiting ? "request-waiting" : undefined}>Send request</button>
            <span role="status" class="success-text">${sent ? "Request sent." : ""}</span>
          </div>
        </${Form}>
      </section>
      <section class="panel" aria-labelledby="requests-title">
        <h2 id="requests-title">Your requests</h2>
        <${Requests} requests=${requests} />
      </section>
    </div>`;
}
