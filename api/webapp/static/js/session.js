// The signed-in User, read once from account/me and kept for the page's life.
import { api } from "./api.js";
import { forgetLastAddress, forgetPlayground } from "./playground/address.js";

let me = null;
let pending = null;

export function currentUser() {
  return me;
}

/** A new sign-in: Playground in the navigation opens a fresh Playground again. */
export function setUser(user) {
  forgetLastAddress();
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
    forgetPlayground();
  }
}
