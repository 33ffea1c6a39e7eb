// A User's page on Admin (/admin/users/<id>), for admins only; anyone else gets the App's own
// "Page not found". Spec "Open a User's page": their account, their details, their tags, their Budget
// and usage, their API keys, their Application and the admins' notes. The menu beside the email has
// the actions of the User's row on Users, and Copy User id (the id that the API's logs and PostHog
// name the User by). The days, key and model of Budget and usage are kept in the address.
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { LoadFailed } from "../components/load_failed.js";
import { api } from "../api.js";
import { useCopy } from "../components/copy.js";
import { Link } from "../components/link.js";
import { Menu } from "../components/menu.js";
import { PageHeader } from "../notice.js";
import { tabAddress } from "./admin.js";
import NotFound from "./not_found.js";
import { ACTIONS, UserActionDialog } from "../admin/user_actions.js";
import { Account, ApiKeys, Application, Details, Tags } from "../admin/user_page_parts.js";
import { BudgetAndUsage } from "../admin/user_page_usage.js";
import { Notes } from "../admin/user_page_notes.js";

/** The User, their keys (revoked ones too), their Application and the models to choose from. */
function useUserPage(userId) {
  const [user, setUser] = useState(null);
  const [failed, setFailed] = useState(null);
  const [keys, setKeys] = useState(null);
  const [application, setApplication] = useState(undefined);
  const [models, setModels] = useState([]);
  const readUser = () => api(`v1/admin/users/${userId}`).then((answer) => { setUser(answer); setFailed(null); })
    .catch((failure) => setFailed(failure));
  const readKeys = () => api(`v1/admin/users/${userId}/keys?all=true`).then((answer) => setKeys(answer.keys))
    .catch(() => setKeys([]));
  useEffect(() => {
    setUser(null);
    readUser();
    readKeys();
    api(`v1/admin/users/${userId}/application`).then((answer) => setApplication(answer.application))
      .catch(() => setApplication(null));
    api("account/models").then((answer) => setModels(answer.data)).catch(() => {});
  }, [userId]);
  // After an action of the menu: the User and their keys as they are now.
  const reread = () => Promise.all([readUser(), readKeys()]);
  return { user, failed, keys, application, models, readUser, reread };
}

/** The actions of the User's row on Users (admin/user_actions.js: each through its dialog), then Copy User id. */
function UserMenu({ user, me, title, copy, onDone }) {
  const [action, setAction] = useState(null);
  const items = [
    ...ACTIONS.map(([name, label]) => ({ label, danger: name === "delete", onSelect: () => setAction(name) })),
    { label: "Copy User id", onSelect: () => copy(user.id, "the User id") },
  ];
  return html`<${Menu} label="Actions" ariaLabel=${`Actions for ${title}`} items=${items} />
    <${UserActionDialog} action=${action} users=${[user]} me=${me} ownRow=${true} onClose=${() => setAction(null)} onDone=${onDone} />`;
}

export default function AdminUser({ route, user: visitor }) {
  if (!visitor || visitor.role !== "admin") return html`<${NotFound} route=${route} user=${visitor} />`;
  const userId = decodeURIComponent(route.path.split("/")[3] || "");
  const page = useUserPage(userId);
  const [copy, copyDialog, copied] = useCopy();
  const back = html`<p class="user-back"><${Link} to=${tabAddress("users")}>← Users</${Link}></p>`;
  if (page.failed) {
    const missing = page.failed.status === 404 || page.failed.status === 400;
    return html`${back}<${PageHeader} title="User" />
      <${LoadFailed} heading=${missing ? "No such User" : "Could not read this User"} text=${page.failed.message}
        onRetry=${missing ? null : page.readUser} />`;
  }
  const user = page.user;
  if (!user) return html`${back}<${PageHeader} title="User" /><p role="status">Loading…</p>`;
  const title = user.email || user.name;
  return html`${back}<${PageHeader} title=${title}>
      <${UserMenu} user=${user} me=${visitor} title=${title} copy=${copy} onDone=${page.reread} />
      <span class="status-line" role="status">${copied}</span>
    </${PageHeader}>
    ${copyDialog}
    <div class="user-page">
      <${Account} user=${user} />
      <${Details} user=${user} onSaved=${page.readUser} />
      <${Tags} user=${user} />
      <${BudgetAndUsage} userId=${user.id} query=${route.query} keys=${page.keys} models=${page.models} />
      <${ApiKeys} keys=${page.keys} />
      <${Application} application=${page.application} />
      <${Notes} userId=${user.id} />
    </div>`;
}
