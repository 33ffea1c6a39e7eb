// The Graph alone on a page, over a generated Loom (tests/browser/test_browser_loom_graph.py and
// bench/loom_graph.py): ?n=2000&seed=1. window.loomGraph holds the Nodes, what was selected, and
// the timings: how long a mount, or any change, took to its first frame, and each wheel's frame.
import { h, render } from "preact";
import { Graph, firstLine } from "/api/webapp/static/js/loom/graph.js";
import { useState } from "preact/hooks";

const params = new URLSearchParams(location.search);
const N = Number(params.get("n") || 2000);
const SEED = Number(params.get("seed") || 1);

function random(seed) { // mulberry32: the same Loom for the same seed
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ("the lighthouse keeper climbed stairs one last time and at top he saw a ship sailing " +
  "through fog toward rocks below while gulls circled over water she said nothing because night " +
  "was cold old lamp still burned bright enough to guide them home").split(" ");

/** A Loom like one grown by hand: Branches of 1 to 8 Nodes (mostly 2 to 4), most grown under a
 * recent Node (a path followed deep), some under any Node (a path come back to). */
export function makeLoom(n, seed) {
  const rand = random(seed);
  const pick = (list) => list[Math.floor(rand() * list.length)];
  const id = (i) => `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;
  const text = (i) => {
    const count = 4 + Math.floor(rand() * 40);
    const words = Array.from({ length: count }, () => pick(WORDS));
    const lines = words.join(" ").replace(/ (she|night) /g, (m, w) => (rand() < 0.3 ? `\n${w} ` : m));
    return (i === 0 ? "" : rand() < 0.15 ? "\n" : " ") + `${i}: ${lines}`;
  };
  const nodes = [{ id: id(0), object: "loom.node", parent_id: null, status: "completed", text: text(0) }];
  while (nodes.length < n) {
    const under = rand() < 0.7 ? nodes[Math.max(0, nodes.length - 1 - Math.floor(rand() * 6))] : pick(nodes);
    const branch = pick([1, 2, 2, 3, 3, 3, 4, 4, 5, 6, 8]);
    for (let b = 0; b < branch && nodes.length < n; b += 1) {
      const i = nodes.length;
      const status = rand() < 0.03 ? "failed" : rand() < 0.03 ? "cancelled" : "completed";
      nodes.push({ id: id(i), object: "loom.node", parent_id: under.id, status, text: text(i) });
    }
  }
  return nodes;
}

/** Milliseconds from now to the first frame painted after `change` ran in which `ready()` holds:
 * a rAF runs before its frame's paint, and a message posted from it runs after. */
export function timeToFrame(change, ready = () => true) {
  const start = performance.now();
  change();
  return new Promise((resolve) => {
    const frame = () => requestAnimationFrame(() => {
      const channel = new MessageChannel();
      channel.port1.onmessage = () => (ready() ? resolve(performance.now() - start) : frame());
      channel.port2.postMessage(0);
    });
    frame();
  });
}

const drawn = () => document.querySelector("#graph [role=treeitem]") !== null;

const nodes = makeLoom(N, SEED);
const selected = [];
const wheels = [];
const root = document.getElementById("graph");

function Harness() {
  const [read, setRead] = useState(null);
  window.loomGraph.setRead = setRead;
  return h(Graph, { nodes, selectedId: read, onSelect: (id) => {
    selected.push(id);
    setRead(id);
    document.getElementById("read").textContent = `Read: ${firstLine(nodes.find((n) => n.id === id).text)}`;
  } });
}

// Each wheel, measured around the Graph: `latency` from the event's timeStamp to the end of the
// frame after it; `handler` the event's dispatch (capture on window to its bubbling back there,
// the Graph's handler between); `frame` from that frame's rAF to its end (style, layout, paint).
window.addEventListener("wheel", (event) => {
  const at = event.timeStamp;
  const dispatched = performance.now();
  window.addEventListener("wheel", () => {
    const handler = performance.now() - dispatched;
    requestAnimationFrame(() => {
      const frameAt = performance.now();
      const channel = new MessageChannel();
      channel.port1.onmessage = () => {
        const now = performance.now();
        wheels.push({ latency: now - at, handler, frame: now - frameAt });
      };
      channel.port2.postMessage(0);
    });
  }, { once: true, passive: true });
}, { capture: true, passive: true });

window.loomGraph = {
  nodes, selected, wheels, firstLine,
  mount: () => timeToFrame(() => render(h(Harness, null), root), drawn),
  unmount: () => render(null, root),
  timeToFrame,
};
window.loomGraph.firstPaint = window.loomGraph.mount();
