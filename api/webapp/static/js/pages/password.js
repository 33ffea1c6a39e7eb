// Set your password (approval and set links) or Choose a new password (reset links).
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { Field, FormError, splitError } from "../components/field.js";
import { Form } from "../components/form.js";
import { Link } from "../components/link.js";

const WORDS = {
  set: { title: "Set your password", label: "Password", button: "Set the password", done: "Your password is set." },
  reset: { title: "Choose a new password", label: "New password", button: "Set the new password", done: "Your password is changed." },
};

function words(purpose) {
  return purpose === "reset" ? WORDS.reset : WORDS.set;
}

function LinkFailed() {
  return html`<section class="card">
    <h1>The link did not work</h1>
    <p>The link is too old, or it was used. Only your newest password link works.</p>
    <div class="actions"><${Link} to="/forgot-password" class="button primary">Ask for a new link</${Link}></div>
  </section>`;
}

export default function Password({ route }) {
  const token = route.query.get("token") || "";
  const guess = route.path === "/reset-password" ? "reset" : "set";
  const [link, setLink] = useState(token ? null : { failed: true });
  const [password, setPassword] = useState("");
  const [error, setError] = useState(null);
  const [done, setDone] = useState(null);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    if (!token) return;
    api(`account/password-links/${encodeURIComponent(token)}`, { quiet401: true })
      .then((answer) => setLink(answer))
      .catch((failure) => setLink(failure.status === 410 || failure.status === 404 ? { failed: true } : { purpose: guess, error: failure }));
  }, [token]);

  useEffect(() => {
    if (link && !link.failed) document.title = `${words(link.purpose).title} · ACS Infra`;
  }, [link]);

  if (!link) return html`<section class="card"><h1>${words(guess).title}</h1><p role="status">Loading…</p></section>`;
  if (link.failed) return html`<${LinkFailed} />`;
  const text = words(link.purpose);

  async function submit(event) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const answer = await api("account/password", { method: "POST", body: { token, password }, quiet401: true });
      setDone((answer && answer.message) || text.done);
    } catch (failure) {
      if (failure.code === "link_expired") setLink({ failed: true });
      else setError(failure);
    } finally {
      setBusy(false);
    }
  }

  if (done) {
    return html`<section class="card">
      <h1>${text.title}</h1>
      <p class="success" role="status">${done}</p>
      <div class="actions"><${Link} to="/sign-in" class="button primary">Sign in</${Link}></div>
    </section>`;
  }
  const errors = splitError(error || link.error, ["password"]);
  return html`<section class="card">
    <h1>${text.title}</h1>
    ${link.email ? html`<p class="break">For <strong>${link.email}</strong></p>` : null}
    <${Form} onSubmit=${submit}>
      <input type="email" name="username" autocomplete="username" value=${link.email || ""} hidden readonly />
      <${Field} label=${text.label} type="password" autocomplete="new-password" required minlength="8"
        hint="At least 8 characters." value=${password} onInput=${setPassword} error=${errors.field.password} />
      <${FormError} message=${errors.form} />
      <div class="actions"><button type="submit" class="primary" disabled=${busy}>${text.button}</button></div>
    </${Form}>
  </section>`;
}
