// The Admin page's Feedback tab (spec: "Send feedback"): every note, newest first, with when it came, its type,
// the note, its page, who sent it (Anonymous when they chose so) and their browser, its screenshots, the App's
// recent errors and request ids, and the Linear column, which links to the note's issue when one was made or says
// why none was. Older notes come with Show older notes, 50 at a time.
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { api, url } from "../api.js";
import { when } from "../components/format.js";
import { Link } from "../components/link.js";

const KINDS = { bug: "Bug", feature_request: "Feature request", general: "General" };
const PAGE = 50;

function From({ item }) {
  if (item.anonymous) return html`<span class="muted">Anonymous</span>`;
  const user = item.user || {};
  return html`<${Link} to=${`/admin/users/${user.id}`}>${user.email || user.name || user.id}</${Link}>
    ${item.browser ? html`<span class="feedback-browser muted" title=${item.browser}>${item.browser}</span>` : null}`;
}

function Shots({ item }) {
  if (!item.screenshots.length) return html`<span class="muted">None</span>`;
  return html`<ul class="feedback-thumbs">${item.screenshots.map((shot, index) => html`<li key=${shot.file}>
    <a href=${url(shot.url)} target="_blank" rel="noopener" title=${`${shot.name}, opens in a new tab`}>
      <img src=${url(shot.url)} alt=${`Screenshot ${index + 1}: ${shot.name}`} loading="lazy" />
    </a></li>`)}</ul>`;
}

function Errors({ item }) {
  if (item.anonymous) return html`<span class="muted">Not sent</span>`;
  if (!item.errors.length) return html`<span class="muted">None</span>`;
  return html`<ul class="feedback-error-list">${item.errors.map((error, index) => html`<li key=${index}>
    <span class="feedback-error-status">${error.status || "No answer"}${error.code ? ` ${error.code}` : ""}</span>
    ${error.path ? html`<span class="feedback-error-path muted">${error.path}</span>` : null}
    ${error.message ? html`<span class="feedback-error-message">${error.message}</span>` : null}
    ${error.request_id ? html`<code class="feedback-request-id">${error.request_id}</code>` : null}
  </li>`)}</ul>`;
}

function Linear({ item }) {
  if (item.linear.url) {
    const name = item.linear.url.split("/").filter(Boolean).pop();
    return html`<a href=${item.linear.url} target="_blank" rel="noopener">${name}</a>`;
  }
  if (item.linear.error) return html`<span class="warn-text" title=${item.linear.error}>Not made</span>
    <span class="feedback-linear-error muted">${item.linear.error}</span>`;
  return html`<span class="muted">—</span>`;
}

function Row({ item }) {
  return html`<tr>
    <td class="nowrap">${when(item.created_at)}</td>
    <td class="nowrap">${KINDS[item.kind] || item.kind}</td>
    <td class="feedback-note">${item.note}</td>
    <td class="feedback-page-cell"><code>${item.page || "—"}</code></td>
    <td class="feedback-from"><${From} item=${item} /></td>
    <td><${Shots} item=${item} /></td>
    <td class="feedback-errors-cell"><${Errors} item=${item} /></td>
    <td><${Linear} item=${item} /></td>
  </tr>`;
}

export default function Tab() {
  const [notes, setNotes] = useState(null);
  const [more, setMore] = useState(false);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);

  async function load(before) {
    setBusy(true);
    setError(null);
    try {
      const query = new URLSearchParams({ limit: String(PAGE) });
      if (before) query.set("before", before);
      const page = await api(`v1/admin/feedback?${query}`);
      setNotes((now) => [...(before ? now || [] : []), ...page.data]);
      setMore(page.has_more);
    } catch (failure) {
      setError(failure.message);
    } finally {
      setBusy(false);
    }
  }
  useEffect(() => { load(null); }, []);

  if (notes === null) {
    return error ? html`<p class="form-error" role="alert">Could not load the notes: ${error}</p>
      <button type="button" onClick=${() => load(null)}>Try again</button>`
      : html`<p class="loading" role="status">Loading…</p>`;
  }
  if (!notes.length) return html`<p>No feedback yet.</p>`;
  return html`<div class="table-scroll" tabindex="0" role="region" aria-label="Feedback">
      <table class="table feedback-table">
        <thead><tr><th scope="col">Sent</th><th scope="col">Type</th><th scope="col">Note</th><th scope="col">Page</th>
          <th scope="col">From</th><th scope="col">Screenshots</th><th scope="col">Errors and request ids</th>
          <th scope="col">Linear</th></tr></thead>
        <tbody>${notes.map((item) => html`<${Row} key=${item.id} item=${item} />`)}</tbody>
      </table>
    </div>
    ${error ? html`<p class="form-error" role="alert">${error}</p>` : null}
    ${more ? html`<div class="actions"><button type="button" disabled=${busy}
      onClick=${() => load(notes[notes.length - 1].id)}>Show older notes</button></div>` : null}`;
}
