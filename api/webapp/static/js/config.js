// Addresses outside the App: the docs site and the team's mailbox.
export const DOCS = "https://www.v2.infra.acsresearch.org/docs";
export const SUPPORT_EMAIL = "infra@acsresearch.org";

export function docs(path = "") {
  return `${DOCS}${path}`;
}
