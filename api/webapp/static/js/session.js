// The signed-in User, read once from account/me and kept for the page's life.
import { api } from "./api.js";

let me = null;
let pending = null;

export function currentUser() {
  return me;
}

export function setUser(user) {
  me = user;
  pending = null;
}

export function loadUser({ quiet401 = false } = {}) {
  if (me) return Promise.resolve(me);
  if (!pending) {
    pending = api("account/me", { quiet401 }).then((user) => (me = user)).finally(() => { pending = null; });
  }
  return pending;
}

export async function signOut() {
  try {
    await api("account/sign-out", { method: "POST", quiet401: true });
  } finally {
    me = null;
    sessionStorage.clear();
  }
}
