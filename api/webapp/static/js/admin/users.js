// The Admin page's Users tab (spec: "Manage Users", "Act on many Users at once", "Group Users with tags"):
// every User with the guide's columns, the Tag filter kept in the address (?tab=users&tag=), pages of 50
// rows, a box in front of each row and one in the header that selects every row the filter shows, on
// every page, and Selected Users' actions (admin/user_actions.js, which a User's page shares).
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { compact, day, number, when } from "../components/format.js";
import { Link } from "../components/link.js";
import { modelList, useModels } from "../components/model_name.js";
import { navigate } from "../router.js";
import { tabAddress } from "../pages/admin.js";
import { UserActions, selectable, users as countUsers } from "./user_actions.js";

const PAGE_SIZE = 50;
const ENGAGEMENT = { active: "Active", cooling: "Cooling", churned: "Churned", not_activated: "Not activated" };
const MODELS_SHOWN = 3;

function useUsers() {
  const [state, setState] = useState({ users: null, failed: false });
  const load = async () => {
    try {
      const answer = await api("v1/admin/users");
      setState({ users: answer.users, failed: false });
    } catch (failure) {
      setState((old) => ({ ...old, failed: true, error: failure.message }));
    }
  };
  useEffect(() => { load(); }, []);
  return [state, load];
}

function TagFilter({ tags, value }) {
  const choose = (event) => navigate(tabAddress("users", { tag: event.currentTarget.value }), { replace: true });
  return html`<div class="field users-tag-filter">
    <label for="users-tag">Tag</label>
    <select id="users-tag" value=${value} onChange=${choose}>
      <option value="">All tags</option>
      ${tags.map((tag) => html`<option value=${tag}>${tag}</option>`)}
    </select>
  </div>`;
}

/** The header's box: every row that the filter shows, on every page; mixed while some are selected. */
function AllBox({ rows, selected, onChange }) {
  const ref = useRef(null);
  const count = rows.filter((user) => selected.has(user.id)).length;
  useLayoutEffect(() => {
    if (ref.current) ref.current.indeterminate = count > 0 && count < rows.length;
  });
  return html`<input type="checkbox" ref=${ref} aria-label="Select every User that the filter shows, on every page"
    checked=${rows.length > 0 && count === rows.length} disabled=${rows.length === 0}
    onChange=${(event) => onChange(event.currentTarget.checked)} />`;
}

function Standing({ user }) {
  if (user.deleted_at) return html`<span class="badge badge-deleted">Deleted</span>`;
  return user.standing === "suspended"
    ? html`<span class="badge badge-suspended">Suspended</span>`
    : html`<span class="badge badge-active">Active</span>`;
}

/** The models a User used, most tokens first, by their short names; every one's id on hover. */
function Models({ models, served }) {
  if (!models.length) return "—";
  const shown = models.slice(0, MODELS_SHOWN);
  const more = models.length - shown.length;
  return html`<span title=${models.join(", ")}>${modelList(served, shown)}${more ? ` +${more}` : ""}</span>`;
}

function UserRow({ user, me, checked, onToggle, served }) {
  const who = user.email || user.name;
  const can = selectable(user, me);
  const why = user.id === me?.id ? "your own row" : "deleted";
  return html`<tr class=${user.deleted_at ? "users-deleted" : ""}>
    <td class="users-box"><input type="checkbox" checked=${checked} disabled=${!can}
      aria-label=${can ? `Select ${who}` : `Select ${who} (${why}: cannot be selected)`}
      onChange=${(event) => onToggle(user.id, event.currentTarget.checked)} /></td>
    <th scope="row" class="users-who">
      <${Link} to=${`/admin/users/${user.id}`} title=${who}>${who}</${Link}>
      ${user.email ? html`<span class="muted" title=${user.name}>${user.name}</span>` : null}
    </th>
    <td>${user.organization || "—"}</td>
    <td>${user.role === "admin" ? "Admin" : "User"}</td>
    <td><${Standing} user=${user} /></td>
    <td>${user.tags.length ? user.tags.join(", ") : "—"}</td>
    <td><span class=${`engagement engagement-${user.engagement}`}>${ENGAGEMENT[user.engagement]}</span></td>
    <td>${when(user.last_completion_at)}</td>
    <td class="num">${number(user.active_weeks)}</td>
    <td class="num" title=${number(user.tokens_last_30_days)}>${compact(user.tokens_last_30_days)}</td>
    <td class="users-models"><${Models} models=${user.models} served=${served} /></td>
    <td class="num" title=${number(user.budget_left)}>${compact(user.budget_left)}</td>
    <td class="num" title=${user.allowance_is_default ? "The platform's default" : undefined}>${compact(user.monthly_allowance)}</td>
    <td class="num">${number(user.api_keys)}</td>
    <td>${day(user.created_at)}</td>
  </tr>`;
}

function Pages({ page, pages, first, last, total, onPage }) {
  if (pages <= 1) return null;
  return html`<nav class="users-pages" aria-label="Pages of Users">
    <button type="button" disabled=${page === 0} onClick=${() => onPage(page - 1)}>Previous</button>
    <span>Users ${number(first)}–${number(last)} of ${number(total)}</span>
    <button type="button" disabled=${page >= pages - 1} onClick=${() => onPage(page + 1)}>Next</button>
  </nav>`;
}

export default function UsersTab({ route, user: me }) {
  const [state, reload] = useUsers();
  const [selected, setSelected] = useState(() => new Set());
  const [page, setPage] = useState(0);
  const served = useModels();
  const tag = route.query.get("tag") || "";
  useEffect(() => setPage(0), [tag]);
  if (state.users === null) {
    return state.failed
      ? html`<p class="form-error" role="alert">Could not load the Users. ${state.error}</p>`
      : html`<p role="status">Loading…</p>`;
  }
  const all = state.users;
  const tags = [...new Set(all.flatMap((user) => user.tags))].sort();
  const rows = tag ? all.filter((user) => user.tags.includes(tag)) : all;
  const choosable = rows.filter((user) => selectable(user, me));
  // An action acts on the selected Users that the filter shows (the spec).
  const chosen = choosable.filter((user) => selected.has(user.id));
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
  const at = Math.min(page, pages - 1);
  const shown = rows.slice(at * PAGE_SIZE, (at + 1) * PAGE_SIZE);
  const toggle = (id, on) => setSelected((old) => {
    const next = new Set(old);
    if (on) next.add(id); else next.delete(id);
    return next;
  });
  const toggleAll = (on) => setSelected(new Set(on ? choosable.map((user) => user.id) : []));
  return html`<section class="admin-users" aria-label="Users">
    <div class="users-toolbar">
      <${TagFilter} tags=${tags} value=${tag} />
      <p class="users-count" role="status">${countUsers(rows.length)}${chosen.length ? `, ${chosen.length} selected` : ""}</p>
      <${UserActions} users=${chosen} me=${me} onDone=${() => { setSelected(new Set()); reload(); }} />
    </div>
    ${state.failed ? html`<p class="form-error" role="alert">Could not refresh.</p>` : null}
    ${rows.length === 0 ? html`<p class="empty">No Users${tag ? ` with the tag ${tag}` : ""}.</p>` : html`
    <div class="table-scroll users-table-scroll" tabindex="0" role="region" aria-label="Users table">
      <table class="table users-table">
        <caption class="visually-hidden">Users${tag ? ` with the tag ${tag}` : ""}</caption>
        <thead><tr>
          <th scope="col" class="users-box"><${AllBox} rows=${choosable} selected=${selected} onChange=${toggleAll} /></th>
          <th scope="col">Email</th><th scope="col">Organization</th><th scope="col">Role</th>
          <th scope="col">Standing</th><th scope="col">Tags</th><th scope="col">Engagement</th>
          <th scope="col">Last Completion</th><th scope="col" class="num">Active weeks</th>
          <th scope="col" class="num">Tokens, 30 days</th><th scope="col">Models</th>
          <th scope="col" class="num">Budget</th><th scope="col" class="num">Monthly allowance</th>
          <th scope="col" class="num">API keys</th><th scope="col">Joined</th>
        </tr></thead>
        <tbody>${shown.map((user) => html`<${UserRow} key=${user.id} user=${user} me=${me}
          checked=${selected.has(user.id) && selectable(user, me)} onToggle=${toggle} served=${served} />`)}</tbody>
      </table>
    </div>
    <${Pages} page=${at} pages=${pages} first=${at * PAGE_SIZE + 1} last=${at * PAGE_SIZE + shown.length}
      total=${rows.length} onPage=${setPage} />`}
  </section>`;
}
