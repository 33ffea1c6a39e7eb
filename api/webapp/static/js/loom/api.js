// The Loom routes under /account/looms (the /v1/looms routes for the App's session: the same
// bodies and answers), and following a Loom's stream: Server-Sent Events, each a whole Node that
// changed, [DONE] once no Node grows (spec: "Follow a Loom as a stream").
import { api, url } from "../api.js";
import { events } from "../components/events.js";

export const GROWING = new Set(["queued", "running"]);

const at = (id) => `account/looms/${encodeURIComponent(id)}`;

export const listLooms = () => api("account/looms");
export const readLoom = (id) => api(at(id));
export const createLoom = (prompt) => api("account/looms", { method: "POST", body: { prompt } });
export const importLoom = (file) => api("account/looms/import", { method: "POST", body: file });
export const changeLoom = (id, change) => api(at(id), { method: "POST", body: change });
export const deleteLoom = (id) => api(at(id), { method: "DELETE" });
export const exportLoom = (id) => api(`${at(id)}/export`);
export const stopLoom = (id) => api(`${at(id)}/cancel`, { method: "POST", body: {} });
export const branchAt = (id, nodeId, body) => api(`${at(id)}/nodes/${encodeURIComponent(nodeId)}/branch`, { method: "POST", body });

/** Follow the Loom `id` until its stream says [DONE]: onNode(node) for each Node that changed,
 * onError(error object, status) for a refusal or a failed read. A cut stream (a restart, a proxy)
 * is opened again; the returned function ends it. Resolves true at [DONE]. */
export function followLoom(id, onNode, onError) {
  const controller = new AbortController();
  let retry = null;
  let tries = 0;
  const done = new Promise((resolve) => {
    async function follow() {
      try {
        const response = await fetch(url(`${at(id)}/stream`), {
          headers: { Accept: "text/event-stream" }, credentials: "same-origin", signal: controller.signal,
        });
        if (!response.ok) {
          const body = await response.json().catch(() => null);
          onError(body && body.error ? body.error : { message: `The App got an error (${response.status}).` }, response.status);
          resolve(false);
          return;
        }
        tries = 0;
        for await (const data of events(response)) {
          if (data === "[DONE]") { resolve(true); return; }
          const doc = JSON.parse(data);
          if (doc.error && !doc.object) onError(doc.error, 200);
          else onNode(doc);
        }
        throw new Error("cut");
      } catch {
        if (controller.signal.aborted) { resolve(false); return; }
        tries += 1;
        retry = setTimeout(follow, Math.min(10000, 500 * 2 ** tries));
      }
    }
    follow();
  });
  const end = () => { controller.abort(); clearTimeout(retry); };
  return { done, end };
}
