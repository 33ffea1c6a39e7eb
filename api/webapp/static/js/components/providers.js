// Sign-in providers: the ones the App offers (GET account/providers), the words of a refusal that the
// provider's callback sent back in ?problem= (written once, in domain/account/provider_presets.py), and
// the start of a provider's sign-in or link, which is a navigation to the provider, not a JSON call.
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { api, url } from "../api.js";
import { Link } from "./link.js";

/** {providers: [{id, name}], messages: {code: words}}, or null until read (and when the read fails). */
export function useProviders() {
  const [offered, setOffered] = useState(null);
  useEffect(() => {
    let live = true;
    api("account/providers", { quiet401: true })
      .then((answer) => live && setOffered(answer))
      .catch(() => live && setOffered({ providers: [], messages: {} }));
    return () => { live = false; };
  }, []);
  return offered;
}

/** Opens the provider's sign-in; `intent` "sign-in" or "link", `next` the App's page after a sign-in. */
export function startProvider(id, intent, next) {
  const query = new URLSearchParams({ intent });
  if (next) query.set("next", next);
  window.location.assign(url(`account/providers/${encodeURIComponent(id)}/start?${query}`));
}

/** The words of the callback's refusal in `query` (?provider=&problem=&wait=), or null. */
export function providerProblem(offered, query, wait) {
  const code = query.get("problem");
  if (!offered || !code) return null;
  const id = query.get("provider");
  const provider = offered.providers.find((each) => each.id === id);
  const words = offered.messages[code] || offered.messages.failed || "";
  return { code, text: words.replaceAll("{provider}", provider ? provider.name : "The provider").replaceAll("{n}", String(wait)) };
}

/** A refusal of a provider's sign-in or link, with the Apply form's link when no User has the email. */
export function ProviderProblem({ problem }) {
  if (!problem || !problem.text) return null;
  return html`<div class="form-error provider-problem" role="alert" tabindex="-1">
    <p>${problem.text}</p>
    ${problem.code === "no_user" ? html`<p><${Link} to="/apply">Apply for access</${Link}></p>` : null}
  </div>`;
}
