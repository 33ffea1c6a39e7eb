// Apply for access, or with ?invite= set up the account an Invite offers.
import { useEffect, useState } from "preact/hooks";
import { html } from "../html.js";
import { api } from "../api.js";
import { Checkbox, Field, FormError, splitError } from "../components/field.js";
import { Form } from "../components/form.js";
import { Link } from "../components/link.js";
import { navigate } from "../router.js";

const FIELDS = ["email", "name", "organization", "planned_usage", "how_you_heard", "links", "expected_tokens", "agree_to_rules"];
const REQUIRED = {
  email: "Enter your email.",
  name: "Enter your name.",
  organization: "Enter your organization.",
  planned_usage: "Say how you plan to use the platform.",
};

function Rules() {
  return html`<section class="rules" aria-labelledby="rules-title">
    <h2 id="rules-title">The platform rules</h2>
    <p>ACS Infra is in research preview. You agree to these rules when you apply.</p>
    <h3>Your access is personal</h3>
    <p>Do not share your account or your API keys. If someone else needs access, point them to the Apply form.</p>
    <h3>Do not use the platform for harm</h3>
    <p>Do not use the platform for illegal, harmful, or plainly unethical purposes.</p>
    <h3>Expect rough edges</h3>
    <p>The platform is in research preview, so expect rough edges. When something breaks, tell us.</p>
    <h3>Link to the platform when it helps</h3>
    <p>When the platform is a significant help to your findings, consider a link to it in the paper or post that
      presents them. The link goes to the ACS Infra website, <code>https://infra.acsresearch.org</code>.</p>
  </section>`;
}

function missing(form, invite) {
  const errors = {};
  for (const [name, message] of Object.entries(REQUIRED)) {
    if (invite && name === "email") continue;
    if (!String(form[name] || "").trim()) errors[name] = message;
  }
  if (!form.agree_to_rules) errors.agree_to_rules = "Agree to the platform rules to apply.";
  return errors;
}

export default function Apply({ route }) {
  const invite = route.query.get("invite");
  const [form, setForm] = useState({ email: "", name: "", organization: "", planned_usage: "", how_you_heard: "",
    links: "", expected_tokens: "", agree_to_rules: false });
  const [inviteState, setInviteState] = useState(invite ? "loading" : null);
  const [errors, setErrors] = useState({});
  const [formError, setFormError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [received, setReceived] = useState(false);
  const set = (name) => (value) => setForm((old) => ({ ...old, [name]: value }));

  useEffect(() => {
    if (!invite) return;
    api(`account/invites/${encodeURIComponent(invite)}`, { quiet401: true })
      .then((answer) => { setForm((old) => ({ ...old, email: answer.email })); setInviteState("ready"); })
      .catch(() => setInviteState("failed"));
  }, [invite]);

  async function submit(event) {
    event.preventDefault();
    setFormError(null);
    const found = missing(form, Boolean(invite));
    setErrors(found);
    if (Object.keys(found).length) return;
    setBusy(true);
    try {
      if (invite) {
        const { name, organization, planned_usage, agree_to_rules } = form;
        const answer = await api(`account/invites/${encodeURIComponent(invite)}`, {
          method: "POST", body: { name, organization, planned_usage, agree_to_rules }, quiet401: true });
        navigate(`/set-password?token=${encodeURIComponent(answer.password_token)}`);
        return;
      }
      const body = { email: form.email, name: form.name, organization: form.organization,
        planned_usage: form.planned_usage, agree_to_rules: form.agree_to_rules };
      for (const name of ["how_you_heard", "links", "expected_tokens"]) if (form[name].trim()) body[name] = form[name];
      await api("account/applications", { method: "POST", body, quiet401: true });
      setReceived(true);
    } catch (failure) {
      if (failure.code === "link_expired") return setInviteState("failed");
      const split = splitError(failure, FIELDS);
      setErrors(split.field);
      setFormError(split.form);
    } finally {
      setBusy(false);
    }
  }

  if (received) {
    return html`<section class="card">
      <h1>Application received</h1>
      <p role="status">An admin reviews your Application, and you get an email when they decide.</p>
    </section>`;
  }
  if (inviteState === "failed") {
    return html`<section class="card">
      <h1>The link did not work</h1>
      <p>An invite link works once, for 7 days. You can still apply.</p>
      <div class="actions"><a class="button primary" href="apply">Apply for access</a></div>
    </section>`;
  }
  if (inviteState === "loading") return html`<section class="card"><h1>Apply for access</h1><p role="status">Loading…</p></section>`;
  return html`<section class="card card-wide">
    <h1>Apply for access</h1>
    <p>${invite ? "You have an invite: set up your account, then choose your password."
      : "An admin approves each User of ACS Infra. Apply once; you get an email when they decide."}</p>
    <${Form} onSubmit=${submit}>
      <${Field} label="Email" type="email" autocomplete="email" required value=${form.email} onInput=${set("email")}
        readonly=${Boolean(invite)} error=${errors.email} />
      <${Field} label="Name" autocomplete="name" required value=${form.name} onInput=${set("name")} error=${errors.name} />
      <${Field} label="Organization" autocomplete="organization" required value=${form.organization}
        onInput=${set("organization")} error=${errors.organization} />
      <${Field} label="Planned usage" multiline required value=${form.planned_usage} onInput=${set("planned_usage")}
        hint="What you plan to research, and with which models." error=${errors.planned_usage} />
      ${invite ? null : html`
        <${Field} label="How did you hear of ACS Infra?" optional value=${form.how_you_heard} onInput=${set("how_you_heard")}
          error=${errors.how_you_heard} />
        <${Field} label="Links to your work" optional multiline value=${form.links} onInput=${set("links")} error=${errors.links} />
        <${Field} label="How many tokens do you expect to need?" optional value=${form.expected_tokens}
          hint="Such as 50K or 2.5M a month." onInput=${set("expected_tokens")} error=${errors.expected_tokens} />`}
      <${Rules} />
      <${Checkbox} label="I agree to these rules." checked=${form.agree_to_rules} onChange=${set("agree_to_rules")}
        error=${errors.agree_to_rules} />
      <${FormError} message=${formError} />
      <div class="actions">
        <button type="submit" class="primary" disabled=${busy}>${invite ? "Set up my account" : "Apply for access"}</button>
      </div>
    </${Form}>
    <p class="aside">Approved already? <${Link} to="/sign-in">Sign in</${Link}></p>
  </section>`;
}
