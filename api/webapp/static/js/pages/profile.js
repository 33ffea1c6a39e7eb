// Profile: name and email, Reset your password, and Sign-in methods (Link and Unlink each provider) when the
// App offers a provider.
import { useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { FormError } from "../components/field.js";
import { Form, useSubmit } from "../components/form.js";
import { PageHeader } from "../notice.js";
import { ProviderProblem, providerProblem, startProvider, useProviders } from "../components/providers.js";

export default function Profile({ route, user }) {
  const [sent, setSent] = useState(null);
  const { error, busy, submit: reset } = useSubmit(async () => {
    const answer = await api("account/password-links", { method: "POST", body: { email: user.email } });
    setSent((answer && answer.message) || "Check your email.");
  });
  return html`<${PageHeader} title="Profile" />
    <section class="panel narrow" aria-labelledby="account-title">
      <h2 id="account-title">Your account</h2>
      <dl class="facts">
        <dt>Name</dt><dd>${user.name || "—"}</dd>
        <dt>Email</dt><dd>${user.email}</dd>
      </dl>
    </section>
    <section class="panel narrow" aria-labelledby="password-title">
      <h2 id="password-title">Password</h2>
      <p>The App emails you a link to choose a new password. A new password signs you out everywhere.</p>
      <${Form} onSubmit=${reset}>
        <div class="actions">
          <button type="submit" disabled=${busy}>Reset your password</button>
          <span role="status" class="success-text">${sent || ""}</span>
        </div>
        <${FormError} message=${error && error.message} />
      </${Form}>
    </section>
    <${SignInMethods} route=${route} user=${user} />`;
}

/** Shown only when the App offers a provider (spec: Link or unlink a provider). */
function SignInMethods({ route, user }) {
  const offered = useProviders();
  const [linked, setLinked] = useState(user.providers || []);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(null);
  if (!offered || !offered.providers.length) return null;
  const problem = error ? null : providerProblem(offered, route.query, Number(route.query.get("wait")) || 0);
  const names = Object.fromEntries(offered.providers.map((provider) => [provider.id, provider.name]));
  // The offered ones, then any that is linked but no longer offered: it can still be unlinked.
  const rows = [...offered.providers, ...linked.filter((each) => !names[each.id])];

  async function unlink(provider) {
    setBusy(provider.id);
    setError(null);
    try {
      const answer = await api(`account/providers/${encodeURIComponent(provider.id)}/unlink`, { method: "POST" });
      setLinked(answer.providers);
      user.providers = answer.providers; // the App's copy of /account/me, for the next visit of this page
    } catch (failure) {
      setError(failure.message);
    } finally {
      setBusy(null);
    }
  }

  return html`<section class="panel narrow" aria-labelledby="methods-title">
    <h2 id="methods-title">Sign-in methods</h2>
    <ul class="sign-in-methods">
      ${rows.map((provider) => {
        const link = linked.find((each) => each.id === provider.id);
        return html`<li key=${provider.id}>
          <span class="method-name">${provider.name}</span>
          <span class="method-state">${link ? `Linked as ${link.email}` : "Not linked"}</span>
          ${link
            ? html`<button type="button" disabled=${busy !== null} onClick=${() => unlink(provider)}>Unlink ${provider.name}</button>`
            : html`<button type="button" onClick=${() => startProvider(provider.id, "link")}>Link ${provider.name}</button>`}
        </li>`;
      })}
    </ul>
    <${FormError} message=${error} />
    <${ProviderProblem} problem=${problem} />
  </section>`;
}
