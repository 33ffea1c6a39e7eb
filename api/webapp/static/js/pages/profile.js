// Profile: name and email, and Reset your password.
import { useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { FormError } from "../components/field.js";
import { Form } from "../components/form.js";
import { PageHeader } from "../notice.js";

export default function Profile({ user }) {
  const [sent, setSent] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  async function reset() {
    setBusy(true);
    setError(null);
    try {
      const answer = await api("account/password-links", { method: "POST", body: { email: user.email } });
      setSent((answer && answer.message) || "Check your email.");
    } catch (failure) {
      setError(failure.message);
    } finally {
      setBusy(false);
    }
  }
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
        <${FormError} message=${error} />
      </${Form}>
    </section>`;
}
