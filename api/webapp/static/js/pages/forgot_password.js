// Ask for a password link. The answer is the same for every address.
import { useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { Field, FormError, splitError } from "../components/field.js";
import { Form } from "../components/form.js";
import { Link } from "../components/link.js";

export default function ForgotPassword({ route }) {
  const [email, setEmail] = useState(route.query.get("email") || "");
  const [error, setError] = useState(null);
  const [empty, setEmpty] = useState(false);
  const [sent, setSent] = useState(null);
  const [busy, setBusy] = useState(false);

  async function submit(event) {
    event.preventDefault();
    setError(null);
    // An empty form is asked to fix, not answered "Check your email." as if a link had gone.
    setEmpty(!email.trim());
    if (!email.trim()) return;
    setBusy(true);
    try {
      const answer = await api("account/password-links", { method: "POST", body: { email } });
      setSent((answer && answer.message) || "Check your email.");
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }

  const errors = splitError(error, ["email"]);
  if (sent) {
    return html`<section class="card">
      <h1>Reset your password</h1>
      <p class="success" role="status">${sent}</p>
      <p>If a User has that address, the email has a link to choose a password. The link works once, for 1 hour.</p>
      <p><${Link} to="/sign-in">Sign in</${Link}></p>
    </section>`;
  }
  return html`<section class="card">
    <h1>Reset your password</h1>
    <p>Enter your email. The App sends a link to choose a password.</p>
    <${Form} onSubmit=${submit}>
      <${Field} label="Email" type="email" autocomplete="email" required value=${email} onInput=${setEmail} 
        error=${empty ? "Enter your email." : errors.field.email} />
      <${FormError} message=${errors.form} />
      <div class="actions">
        <button type="submit" class="primary" disabled=${busy}>Send the link</button>
        <${Link} to="/sign-in">Sign in</${Link}>
      </div>
    </${Form}>
  </section>`;
}
