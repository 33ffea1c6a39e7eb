// The parts of A User's page on Admin that read one document each: Account, Details, Tags,
// API keys and Application (spec: "Open a User's page"). The page (pages/admin_user.js) reads the
// documents and hands each part its own.
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { Field, FormError, splitError } from "../components/field.js";
import { Form } from "../components/form.js";
import { capital, day, lastUsed, number, stamp } from "../components/format.js";
import { Answers } from "./applications_answers.js";

export const ENGAGEMENT = { active: "Active", cooling: "Cooling", churned: "Churned", not_activated: "Not activated" };
// The Apply form's questions, in its order (pages/apply.js), for the answers of GET .../application; the
// email, which the Applications tab lists first, is in the line above them here.
const QUESTIONS = [
  ["name", "Name"], ["organization", "Organization"], ["planned_usage", "Planned usage"],
  ["how_you_heard", "How did you hear of ACS Infra?"], ["links", "Links to your work"],
  ["expected_tokens", "How many tokens do you expect to need?"],
];

/** A part of the page: a section named by its heading. */
export function UserPart({ id, title, children, wide }) {
  return html`<section class=${`user-part${wide ? " user-part-wide" : ""}`} aria-labelledby=${`${id}-title`}>
    <h2 id=${`${id}-title`}>${title}</h2>${children}</section>`;
}

/** The organization that the Admin page shows: the typed one, else the Application's answer, said so. */
function organizationOf(user) {
  if (user.typed_organization) return user.typed_organization;
  if (user.application_organization) return html`${user.application_organization} <span class="muted">(their Application's answer)</span>`;
  return "—";
}

export function Account({ user }) {
  const standing = user.deleted_at ? "Deleted" : capital(user.standing);
  return html`<${UserPart} id="user-account" title="Account">
    <dl class="facts">
      <dt>Name</dt><dd>${user.name}</dd>
      <dt>Email</dt><dd>${user.email || "—"}</dd>
      <dt>Organization</dt><dd data-testid="user-organization">${organizationOf(user)}</dd>
      <dt>Discord handle</dt><dd>${user.discord_handle || "—"}</dd>
      <dt>Role</dt><dd>${capital(user.role)}</dd>
      <dt>Standing</dt><dd>${standing}</dd>
      <dt>Joined</dt><dd>${day(user.created_at)}</dd>
      <dt>Engagement</dt><dd>${ENGAGEMENT[user.engagement] || user.engagement}</dd>
      <dt>Last Completion</dt><dd>${user.last_completion_at ? `${stamp(user.last_completion_at)} UTC` : "None"}</dd>
    </dl>
  </${UserPart}>`;
}

const DETAILS = ["organization", "discord_handle"];

/** Organization and Discord handle, then Save details. An empty Organization is cleared, and the
 * Admin page shows the Application's answer again. `onSaved()` reads the User again. */
export function Details({ user, onSaved }) {
  const [form, setForm] = useState({ organization: "", discord_handle: "" });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState("");
  useEffect(() => {
    setForm({ organization: user.typed_organization || "", discord_handle: user.discord_handle || "" });
  }, [user.id, user.typed_organization, user.discord_handle]);
  const set = (name) => (value) => { setForm({ ...form, [name]: value }); setSaved(""); };
  async function save() {
    setBusy(true);
    setError(null);
    setSaved("");
    try {
      const body = { organization: form.organization.trim(), discord_handle: form.discord_handle.trim() };
      await api(`v1/admin/users/${user.id}/details`, { method: "POST", body });
      await onSaved();
      setSaved("Details saved.");
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }
  const errors = splitError(error, DETAILS);
  const fallback = user.application_organization
    ? `Empty, the Admin page shows their Application's answer again: ${user.application_organization}.`
    : "Empty, the Admin page shows no organization: they have no Application.";
  return html`<${UserPart} id="user-details" title="Details">
    <${Form} onSubmit=${save} class="user-details-form">
      <${Field} label="Organization" value=${form.organization} onInput=${set("organization")} maxLength="200"
        hint=${`Replaces their Application's answer on the Admin page. ${fallback}`} error=${errors.field.organization} />
      <${Field} label="Discord handle" value=${form.discord_handle} onInput=${set("discord_handle")} maxLength="100"
        autocomplete="off" error=${errors.field.discord_handle} />
      <${FormError} message=${errors.form} />
      <div class="actions">
        <button type="submit" class="primary" disabled=${busy}>Save details</button>
        <span role="status" class="success-text">${saved}</span>
      </div>
    </${Form}>
  </${UserPart}>`;
}

export function Tags({ user }) {
  return html`<${UserPart} id="user-tags" title="Tags">
    ${user.tags.length
      ? html`<ul class="user-tags">${user.tags.map((tag) => html`<li class="user-tag">${tag}</li>`)}</ul>`
      : html`<p class="muted">No tags.</p>`}
  </${UserPart}>`;
}

export function ApiKeys({ keys }) {
  const rows = keys === null ? [] : keys;
  return html`<${UserPart} id="user-keys" title="API keys" wide>
    ${keys === null ? html`<p role="status">Loading…</p>` : html`<div class="table-scroll" tabindex="0" role="region" aria-label="Their API keys">
      <table class="table">
        <caption class="visually-hidden">Their API keys</caption>
        <thead><tr><th scope="col">Name</th><th scope="col">Status</th><th scope="col" class="num">This month</th>
          <th scope="col" class="num">Budget</th><th scope="col">Last used</th><th scope="col">Created</th></tr></thead>
        <tbody>${rows.length ? rows.map((key) => html`<tr>
          <td><span class="cut-name" title=${key.name}>${key.name}</span><span class="prefix mono">${key.prefix}…</span></td>
          <td><span class=${`badge badge-${key.status}`}>${capital(key.status)}</span></td>
          <td class="num">${number(key.tokens_this_month)}</td>
          <td class="num">${key.budget_left === null || key.budget_left === undefined ? "—" : number(key.budget_left)}</td>
          <td class="nowrap">${lastUsed(key.last_used_at)}</td><td class="nowrap">${day(key.created_at)}</td>
        </tr>`) : html`<tr><td colspan="6">No API keys.</td></tr>`}</tbody>
      </table></div>`}
  </${UserPart}>`;
}

export function Application({ application }) {
  let body;
  if (application === undefined) body = html`<p role="status">Loading…</p>`;
  else if (application === null) body = html`<p class="muted">No Application: an admin made this User without one.</p>`;
  else {
    body = html`<p class="muted">Sent on ${day(application.created_at)} from ${application.email} · ${capital(application.status)}${
      application.decided_by ? ` by ${application.decided_by}` : ""}</p>
      <${Answers} questions=${QUESTIONS.map(([name, question]) => [question, application.answers[name]])} />`;
  }
  return html`<${UserPart} id="user-application" title="Application">${body}</${UserPart}>`;
}
