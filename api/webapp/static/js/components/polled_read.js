// A part that shows one read of the API and reads it again each minute while its page is open (the
// Admin page's Spend and Models): the last read that worked stays, with the error of the one that failed.
import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";

const EVERY_MS = 60000;

/** [{doc, error}, read again now]; a new `path` reads at once. */
export function usePolledRead(path) {
  const [state, setState] = useState({ doc: null, error: null });
  const load = async () => {
    try {
      setState({ doc: await api(path), error: null });
    } catch (failure) {
      if (failure.name !== "AbortError") setState((old) => ({ ...old, error: failure.message }));
    }
  };
  useEffect(() => {
    load();
    const timer = setInterval(load, EVERY_MS);
    return () => clearInterval(timer);
  }, [path]);
  return [state, load];
}
