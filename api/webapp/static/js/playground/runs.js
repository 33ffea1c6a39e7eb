// The Runs routes under /account/runs, and following Runs as they grow (spec: "Find your Runs
// again"): a stream of Server-Sent Events, each a whole Run (or a deleted one), [DONE] last.
import { useEffect, useRef } from "preact/hooks";
import { api, url } from "../api.js";
import { events } from "../components/events.js";

export const GROWING = new Set(["queued", "running"]);

export function startRuns(requests) {
  return api("account/runs", { method: "POST", body: { requests } });
}

export function listRuns() {
  return api("account/runs");
}

export function readRun(id) {
  return api(`account/runs/${id}`);
}

export function stopRun(id) {
  return api(`account/runs/${id}/stop`, { method: "POST", body: {} });
}

export function stopGroup(groupId) {
  return api(`account/runs/groups/${groupId}/stop`, { method: "POST", body: {} });
}

export function deleteRun(id) {
  return api(`account/runs/${id}`, { method: "DELETE" });
}

export function readActivations(id) {
  return api(`account/runs/${id}/activations`);
}

/** The address of an export file: the chosen Runs (ids) or every Run. */
export function exportAddress(format, ids) {
  const query = new URLSearchParams({ format });
  if (ids) query.set("ids", ids.join(","));
  else query.set("every", "true");
  return url(`account/runs/export?${query}`);
}

/** Follow the Runs `ids` while any of them grows: onRun(run) for each update, onError(error
 * object, status) for a failed read. A change of ids, or the page going, ends the stream. */
export function useFollow(ids, onRun, onError) {
  const handlers = useRef({ onRun, onError });
  handlers.current = { onRun, onError };
  const key = [...ids].sort().join(",");
  useEffect(() => {
    if (!key) return undefined;
    const controller = new AbortController();
    let retry = null;
    let tries = 0;
    async function follow() {
      try {
        const response = await fetch(url(`account/runs/stream?ids=${key}`), {
          headers: { Accept: "text/event-stream" }, credentials: "same-origin", signal: controller.signal,
        });
        if (!response.ok) {
          const body = await response.json().catch(() => null);
          // 404: a Run deleted in another tab; the caller reads the list again.
          handlers.current.onError(body && body.error ? body.error : { message: `The App got an error (${response.status}).` }, response.status);
          return;
        }
        tries = 0;
        for await (const data of events(response)) {
          if (data === "[DONE]") return;
          const doc = JSON.parse(data);
          if (doc.error && !doc.object) handlers.current.onError(doc.error);
          else handlers.current.onRun(doc);
        }
        // Cut without [DONE] (a restart, a proxy): follow again from what the database has.
        throw new Error("cut");
      } catch (error) {
        if (controller.signal.aborted) return;
        tries += 1;
        retry = setTimeout(follow, Math.min(10000, 500 * 2 ** tries));
      }
    }
    follow();
    return () => {
      controller.abort();
      clearTimeout(retry);
    };
  }, [key]);
}
