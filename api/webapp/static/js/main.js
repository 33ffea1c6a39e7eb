// The App's entry: picks the page by path, signs the User in where a page needs it.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { html } from "./html.js";
import { navigate, useRoute } from "./router.js";
import { loadUser } from "./session.js";
import { PublicFrame, Shell } from "./shell.js";

// path -> [module under pages/, the document title, signed in?]
const ROUTES = {
  "/sign-in": ["sign_in", "Sign in", false],
  "/apply": ["apply", "Apply for access", false],
  "/set-password": ["password", "Set your password", false],
  "/reset-password": ["password", "Choose a new password", false],
  "/forgot-password": ["forgot_password", "Reset your password", false],
  "/api-keys": ["api_keys", "API Keys", true],
  "/usage": ["usage", "Usage", true],
  "/usage/request": ["token_request", "Request more tokens", true],
  "/profile": ["profile", "Profile", true],
  "/jobs": ["jobs", "Jobs", true],
};
const modules = {};

function usePage(name) {
  const [loaded, setLoaded] = useState({ name, page: modules[name] || null });
  useEffect(() => {
    if (!name || modules[name]) return;
    let live = true;
    import(`./pages/${name}.js`).then((module) => {
      modules[name] = module.default;
      if (live) setLoaded({ name, page: module.default });
    });
    return () => { live = false; };
  }, [name]);
  // Never the last page's component over this route while this one loads.
  return modules[name] || (loaded.name === name ? loaded.page : null);
}

function Loading() {
  return html`<p class="loading" role="status">Loading…</p>`;
}

function Home() {
  useEffect(() => {
    loadUser({ quiet401: true })
      .then((user) => navigate(user.has_key ? "/usage" : "/api-keys", { replace: true }))
      .catch(() => navigate("/sign-in", { replace: true }));
  }, []);
  return html`<${PublicFrame}><h1 class="visually-hidden">ACS Infra</h1><${Loading} /></${PublicFrame}>`;
}

function NotFound() {
  return html`<${PublicFrame}><div class="card"><h1>This page is not in the App</h1>
    <p><a href="usage">Open Usage</a></p></div></${PublicFrame}>`;
}

function SignedIn({ route, Page }) {
  const [user, setUser] = useState(null);
  useEffect(() => {
    loadUser().then(setUser).catch(() => {});
  }, []);
  if (!user) return html`<${PublicFrame}><h1 class="visually-hidden">ACS Infra</h1><${Loading} /></${PublicFrame}>`;
  return html`<${Shell} path=${route.path} user=${user}>${Page ? html`<${Page} route=${route} user=${user} />` : html`<${Loading} />`}</${Shell}>`;
}

function App() {
  const route = useRoute();
  const entry = ROUTES[route.path];
  const Page = usePage(entry ? entry[0] : null);
  useEffect(() => {
    if (entry) document.title = `${entry[1]} · ACS Infra`;
  }, [route.path]);
  if (route.path === "/") return html`<${Home} />`;
  if (!entry) return html`<${NotFound} />`;
  if (entry[2]) return html`<${SignedIn} route=${route} Page=${Page} />`;
  return html`<${PublicFrame}>${Page ? html`<${Page} route=${route} />` : html`<${Loading} />`}</${PublicFrame}>`;
}

render(html`<${App} />`, document.getElementById("app"));
