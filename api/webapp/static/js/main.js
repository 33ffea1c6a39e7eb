// The App's entry: picks the page by path, signs the User in where a page needs it.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { html } from "./html.js";
import { navigate, useRoute } from "./router.js";
import { lastAddress } from "./playground/address.js";
import { loadUser } from "./session.js";
import { PublicFrame, Shell } from "./shell.js";

// path -> [module under pages/, the document title, signed in?]; signed in null: either
// frame, as the User is (the App's "Page not found", for every other path).
const ROUTES = {
  "/sign-in": ["sign_in", "Sign in", false],
  "/apply": ["apply", "Apply for access", false],
  "/set-password": ["password", "Set your password", false],
  "/reset-password": ["password", "Choose a new password", false],
  "/forgot-password": ["forgot_password", "Reset your password", false],
  "/playground": ["playground", "Playground", true],
  "/loom": ["loom", "Loom", true],
  "/api-keys": ["api_keys", "API Keys", true],
  "/usage": ["usage", "Usage", true],
  "/usage/request": ["token_request", "Request more tokens", true],
  "/profile": ["profile", "Profile", true],
  "/jobs": ["jobs", "Jobs", true],
  "/admin": ["admin", "Admin", true],
};
// A User's page on Admin: /admin/users/<id>.
const ADMIN_USER = ["admin_user", "User", true];
const NOT_FOUND = ["not_found", "Page not found", null];
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
      .then((user) => navigate(user.has_key ? lastAddress() : "/api-keys", { replace: true }))
      .catch(() => navigate("/sign-in", { replace: true }));
  }, []);
  return html`<${PublicFrame}><h1 class="visually-hidden">ACS Infra</h1><${Loading} /></${PublicFrame}>`;
}

// In the signed-in frame for a User with a session, in the public frame for anyone else.
function EitherFrame({ route, Page }) {
  const [user, setUser] = useState(undefined);
  useEffect(() => {
    loadUser({ quiet401: true }).then(setUser, () => setUser(null));
  }, []);
  const content = Page ? html`<${Page} route=${route} user=${user} />` : html`<${Loading} />`;
  if (user === undefined) return html`<${PublicFrame}><h1 class="visually-hidden">ACS Infra</h1><${Loading} /></${PublicFrame}>`;
  if (user) return html`<${Shell} path=${route.path} user=${user}>${content}</${Shell}>`;
  return html`<${PublicFrame}>${content}</${PublicFrame}>`;
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
  const home = route.path === "/";
  const entry = home ? null : ROUTES[route.path] || (/^\/admin\/users\/[^/]+$/.test(route.path) ? ADMIN_USER : NOT_FOUND);
  const Page = usePage(entry ? entry[0] : null);
  useEffect(() => {
    if (entry) document.title = `${entry[1]} · ACS Infra`;
  }, [route.path]);
  if (home) return html`<${Home} />`;
  if (entry[2] === null) return html`<${EitherFrame} route=${route} Page=${Page} />`;
  if (entry[2]) return html`<${SignedIn} route=${route} Page=${Page} />`;
  return html`<${PublicFrame}>${Page ? html`<${Page} route=${route} />` : html`<${Loading} />`}</${PublicFrame}>`;
}

render(html`<${App} />`, document.getElementById("app"));
