// A User's page on Admin (/admin/users/<id>): being built (issue 37).
import { html } from "../html.js";
import { PageHeader } from "../notice.js";
import NotFound from "./not_found.js";

export default function AdminUser({ route, user }) {
  if (!user || user.role !== "admin") return html`<${NotFound} route=${route} user=${user} />`;
  return html`<${PageHeader} title="User" /><p>This page is being built.</p>`;
}
