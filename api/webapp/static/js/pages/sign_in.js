// Sign in: Email and Password, then the page that sent the User here; or Continue with a provider, when the
// App offers one, whose refusal comes back here in ?problem= (components/providers.js).
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { Field, FormError } from "../components/field.js";
import { Form } from "../components/form.js";
import { Link } from "../components/link.js";
import { ProviderProblem, providerProblem, startProvider, useProviders } from "../components/providers.js";
import { navigate, safeNext } from "../router.js";
import { setUser } from "../session.js";

export default function SignIn({ route }) {
  const ended = route.query.get("ended") === "1";
  const [email, setEmail] = useState(route.query.get("email") || "");
  const [password, setPassword] = useState("");
  const [error, setError] = useState(null);
  const [missing, setMissing] = useState({});
  const [wait, setWait] = useState(0);
  const [busy, setBusy] = useState(false);
  const offered = useProviders();
  // A provider's refusal, from its callback; after too many tries, the wait counts down as a password's does.
  const [providerWait, setProviderWait] = useState(Number(route.query.get("wait")) || 0);
  const problem = error ? null : providerProblem(offered, route.query, providerWait);

  useEffect(() => {
    if (providerWait <= 0) return;
    const timer = setTimeout(() => setProviderWait(providerWait - 1), 1000);
    return () => clearTimeout(timer);
  }, [providerWait]);

  useEffect(() => {
    if (wait <= 0) return;
    const timer = setTimeout(() => setWait(wait - 1), 1000);
    return () => clearTimeout(timer);
  }, [wait]);

  async function submit(event) {
    event.preventDefault();
    setError(null);
    // An empty field is asked for here, under the field, rather than sent for a refusal.
    const empty = {};
    if (!email.trim()) empty.email = "Enter your email.";
    if (!password) empty.password = "Enter your password.";
    setMissing(empty);
    if (Object.keys(empty).length) return;
    setBusy(true);
    try {
      const answer = await api("account/sign-in", { method: "POST", body: { email, password }, quiet401: true });
      setUser(answer.user);
      navigate(safeNext(route.query.get("next")) || answer.next || "/usage", { replace: true });
    } catch (failure) {
      setError(failure);
      if (failure.code === "too_many_tries" && failure.retryAfter) setWait(failure.retryAfter);
    } finally {
      setBusy(false);
    }
  }

  const message = error && error.code === "too_many_tries"
    ? (wait > 0 ? `Too many tries to sign in. Wait ${wait} seconds.` : null)
    : error && error.message;
  return html`<section class="card">
    <h1>Sign in</h1>
    ${ended ? html`<p class="info" role="status">Your session has ended.</p>` : null}
    <${Form} onSubmit=${submit}>
      <${Field} label="Email" type="email" autocomplete="email" required value=${email} onInput=${setEmail}
        error=${missing.email} />
      <${Field} label="Password" type="password" autocomplete="current-password" required value=${password}
        onInput=${setPassword} error=${missing.password} />
      <${FormError} message=${message} />
      ${problem && !(problem.code === "too_many_tries" && providerWait <= 0)
        ? html`<${ProviderProblem} problem=${problem} />` : null}
      <div class="actions">
        <button type="submit" class="primary" disabled=${busy || wait > 0}>Sign in</button>
        <${Link} to="/forgot-password">Forgot password?</${Link}>
      </div>
    </${Form}>
    ${offered && offered.providers.length ? html`<div class="providers" role="group" aria-label="Other ways to sign in">
      <p class="providers-or" aria-hidden="true">or</p>
      ${offered.providers.map((provider) => html`<button type="button" class="provider-button" key=${provider.id}
        disabled=${providerWait > 0}
        onClick=${() => startProvider(provider.id, "sign-in", safeNext(route.query.get("next")))}
        >Continue with ${provider.name}</button>`)}
    </div>` : null}
    <p class="aside">No account yet? <${Link} to="/apply">Apply for access</${Link}></p>
  </section>`;
}
