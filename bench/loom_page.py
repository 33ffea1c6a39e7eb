"""The App's real Loom page at 2,000 Nodes against the same page at 200, in Chromium, on the real
server: the open of a Loom, a change that another client makes, a Branch's stream, and a change
made in the page.

    python bench/loom_page.py [--nodes 2000] [--baseline 200] [--rounds 3] [--stream-s 5]
        [--width 1280 --height 800] [--profile embedded --model smollm2-135m] [--json out.json]

The stack is bench/harness.py's (the app behind uvicorn on 127.0.0.1 with the App's pages, a fresh
SQLite ledger, a Runner, the real engine on SmolLM2-135M), served from a thread of this process;
Playwright drives Debian's Chromium (/usr/bin/chromium) signed in as a User, under the App's own
Content-Security-Policy. A second client, the same User's API key on /v1, plays the other client.
Each round, for each size (the order alternating), a Loom of that many Nodes is imported
(`POST /v1/looms/import`, a version 2 file of mixed depths, Branches of 1 to 8 Nodes, each Node's
text a sentence of about 200 characters) and a fresh page of the same browser context (the App's
modules in its cache, which the App's `Cache-Control: no-cache` has it ask for again) goes through:

- open: `loom?loom=ID`, from the navigation's start to the end of the first frame that shows the
  tree and "2,000 Nodes" (the App's start, its read of the whole Loom, and the render), split at
  the read (Resource Timing: its request to its last byte), with the App's modules (how many, from
  the cache or not, when the last came);
- edit in the page: Edit on the root's first child, a new text, Save: from Save's click to the end
  of the frame whose tree row shows the new text (the change's answer is the whole Loom, which
  replaces the page's Nodes), and the answer's own time;
- another client's change: the second client deletes a leaf; from its answer to the end of the
  frame that shows one Node fewer. No stream is open while nothing grows, so the page learns it
  from its list, read every 3 s (pages/loom.js LIST_EVERY_MS), and then reads the Loom whole;
- sibling in the page: Sibling, a text, Add sibling: from the click to the frame with one Node more;
- a Branch in the page: the second client deletes a leaf again (another sample of the line
  above, and room for the Branch's Node: a Loom holds at most 2,000), then the page Branches one
  Node (max_tokens 1,000) under the root: from the click to the frame with its Node. The bench
  selects that Node (End in the tree), so that Text shows it as it grows; then for `--stream-s`
  seconds, for each token, the time from the engine's output that carried it to the end of the
  frame whose Text holds it (clocks: the engine's time.time() and the page's
  performance.timeOrigin + now(), one machine). Then the second client stops the Loom.

It prints p50 / p95 of each over the rounds (the stream: over all its tokens), and the ratio of the
2,000-Node figure to the baseline's, with the CPU that other processes used while it measured. No
figure is a pass or a fail.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Coroutine, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import Output, Seen, Stack, add_stack_args  # noqa: E402
from bench.loom_graph import CHROMIUM, OtherCpu, percentile  # noqa: E402

PASSWORD = "bench horse battery staple"
WORDS = ("the keeper lit the lamp and watched the grey sea roll under a sky of low cloud while gulls "
         "circled over the rocks and a ship far out turned toward the harbour light").split()
WAIT_MS = 60_000

# In every page before its own scripts: when the tree first shows all the Loom's Nodes (from the
# navigation's start), and the helpers the bench calls. A frame's end: a message posted from its
# requestAnimationFrame runs after its paint.
PAGE_SCRIPT = """
window.loomBench = {
  frameEnd() {
    return new Promise((resolve) => requestAnimationFrame(() => {
      const channel = new MessageChannel();
      channel.port1.onmessage = () => resolve(performance.now());
      channel.port2.postMessage(0);
    }));
  },
  count() {
    const element = document.querySelector(".loom-count");
    return element ? Number(element.textContent.replace(/\\D/g, "")) : -1;
  },
  until(check, ms = 60000) {
    return new Promise((resolve, reject) => {
      let done = false;
      setTimeout(() => { if (!done) { done = true; observer.disconnect(); reject(new Error(`not in ${ms} ms: ${check}`)); } }, ms);
      const test = () => {
        if (done || !check()) return;
        done = true;
        observer.disconnect();
        const dom = performance.now();
        loomBench.frameEnd().then((frame) => resolve({ dom, frame, origin: performance.timeOrigin }));
      };
      const observer = new MutationObserver(test);
      observer.observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
      test();
    });
  },
  record() {
    const events = [];
    let last = null;
    const observer = new MutationObserver(() => {
      const element = document.querySelector(".loom-path .path-node");
      const text = element ? element.textContent : null;
      if (text === null || text === last) return;
      last = text;
      const event = { text, frame: null };
      events.push(event);
      loomBench.frameEnd().then((frame) => { event.frame = performance.timeOrigin + frame; });
    });
    observer.observe(document, { subtree: true, childList: true, characterData: true });
    loomBench.events = events;
    loomBench.stopRecording = () => observer.disconnect();
  },
};
if (window.loomBenchExpect) {
  window.loomBenchOpened = loomBench.until(() =>
    loomBench.count() === window.loomBenchExpect && document.querySelector(".tree [role=treeitem]"));
}
"""

# Click a button (of those under `within`), and the time from the click to the end of the frame
# where `check` holds.
CLICK_UNTIL = """async ([within, button, check]) => {
  const holds = new Function(`return (${check})`);
  const t0 = performance.now();
  const shown = loomBench.until(holds);
  [...document.querySelectorAll(`${within} button`)].find((b) => b.textContent.trim() === button).click();
  const at = await shown;
  return at.frame - t0;
}"""


# -- the Loom file ------------------------------------------------------------------------------
@dataclass
class GeneratedLoom:
    """A version 2 Loom file and what the bench needs of its tree."""

    file: dict[str, Any]
    first_child: int  # where in the file's list of Nodes (the root is the first)
    leaves: list[int] = field(default_factory=list)

    def ids_in(self, loom: dict[str, Any]) -> list[str]:
        """The ids that the import gave the file's Nodes (new ones): a read lists them in the
        file's order, parents first."""
        texts = [node["text"] for node in loom["nodes"]]
        if texts != [node["text"] for node in self.file["nodes"]]:
            raise RuntimeError("the imported Loom does not list the file's Nodes in the file's order")
        return [node["id"] for node in loom["nodes"]]


def sentence(rng: random.Random, chars: int = 200) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(WORDS))
    return " " + " ".join(words) + "."


def loom_file(nodes: int, seed: int = 1) -> GeneratedLoom:
    """A tree of `nodes` Nodes, listed parents first (each before its next sibling): the root, then
    Branches of 1 to 8 Nodes, each under a Node drawn at random, the newer ones likelier (so that
    the tree has depth, as a Loom that one grows does)."""
    rng = random.Random(seed)
    ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(nodes)]
    children: dict[str, list[str]] = {ids[0]: []}
    made = 1
    while made < nodes:
        parent = ids[int(made * (1 - rng.random() ** 3)) if made > 1 else 0]
        for _ in range(min(rng.randint(1, 8), nodes - made)):
            children[parent] = children.get(parent, []) + [ids[made]]
            children[ids[made]] = []
            made += 1
    listed: list[dict[str, Any]] = []
    stack: list[tuple[str, str | None, int]] = [(ids[0], None, 0)]
    while stack:
        node_id, parent_id, position = stack.pop()
        text = "The old lighthouse keeper climbed the stairs one last time." if parent_id is None else sentence(rng)
        listed.append({"id": node_id, "parent_id": parent_id, "text": text, "status": "completed",
                       "position": position})
        kids = children[node_id]
        stack.extend((kid, node_id, i) for i, kid in reversed(list(enumerate(kids))))
    file = {"version": 2, "node_order": "parents_first", "loom": {"title": f"Bench Loom of {nodes} Nodes"},
            "nodes": listed}
    place = {node["id"]: i for i, node in enumerate(listed)}
    return GeneratedLoom(file, place[children[ids[0]][0]], [i for i, n in enumerate(listed) if not children[n["id"]]])


def stream_latencies(outputs: list[Output], events: Sequence[Seen]) -> list[float]:
    """As token_to_event (each token: seconds from the engine's output that carried it to the
    first event whose text holds it), for the outputs that came after the page first showed the
    Node (earlier ones came before the page showed it) and that the page showed before the bench
    stopped watching it. Each output counts its own tokens, never those of the outputs left out."""
    if not events:
        return []
    latencies, tokens_before, text_before = [], 0, ""
    for output in outputs:
        counted = output.at > events[0].at and events[-1].text.startswith(output.text)
        if counted and output.text != text_before:  # a token that added no text is skipped
            seen = next(e.at for e in events if e.text.startswith(output.text))
            latencies += [seen - output.at] * (output.tokens - tokens_before)
        tokens_before, text_before = output.tokens, output.text
    return latencies


# -- the stack, in a thread of its own ---------------------------------------------------------------
class Served:
    """bench/harness.py's Stack on an event loop in a thread, and a User with a password and a key."""

    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.stack = Stack(args, tmp)
        self.call(self.stack.start())
        self.email = f"bench-{uuid.uuid4().hex[:8]}@example.org"
        self.key = self.call(self._user())
        self.root = f"http://127.0.0.1:{self.stack.port}"

    def call(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def _user(self) -> str:
        from ledger.accounts import passwords
        from ledger.accounts.keys import create_api_key
        from ledger.accounts.tables import User

        async with self.stack.services.ledger.write_sessions() as session:
            user = User(name=self.email, email=self.email, password_hash=passwords.hash_password(PASSWORD),
                        password_set_at=self.stack.services.clock())
            session.add(user)
            await session.flush()
            _, raw = await create_api_key(session, user.id, "bench")
            await session.commit()
        return raw

    def close(self) -> None:
        try:
            self.call(self.stack.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=30)


def answer(response: Any) -> Any:
    if not 200 <= response.status_code < 300:
        raise RuntimeError(f"{response.request.method} {response.request.url}: HTTP {response.status_code}: "
                           f"{response.text[:500]}")
    return response.json() if response.content else None


# -- one size, one round -----------------------------------------------------------------------------
def one_round(served: Served, api: Any, context: Any, n: int, args: argparse.Namespace, index: int) -> dict[str, Any]:
    from playwright.sync_api import expect

    made = loom_file(n, seed=index + 1)
    loom = answer(api.post("/v1/looms/import", json=made.file))
    loom_id, ids, out = loom["id"], made.ids_in(loom), {}
    first_child, leaves = ids[made.first_child], [ids[i] for i in made.leaves]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.add_init_script(f"window.loomBenchExpect = {n};\n{PAGE_SCRIPT}")
    try:
        step(n, "open")
        page.goto(f"{served.root}/loom?loom={loom_id}")
        opened = page.evaluate("() => window.loomBenchOpened")
        out["open_ms"] = opened["frame"]
        read = page.evaluate("""(id) => {
            const read = performance.getEntriesByType("resource").find((e) => e.name.endsWith(`/account/looms/${id}`));
            return { start: read.startTime, end: read.responseEnd, bytes: read.encodedBodySize }; }""", loom_id)
        # The open in three: the App's start to the read's request, the read, the render after it.
        out["open_before_read_ms"] = read["start"]
        out["open_read_ms"] = read["end"] - read["start"]
        out["open_after_read_ms"] = opened["frame"] - read["end"]
        out["open_read_bytes"] = read["bytes"]
        out["open_read_decoded_bytes"] = page.evaluate("""(id) => performance.getEntriesByType("resource")
            .find((e) => e.name.endsWith(`/account/looms/${id}`)).decodedBodySize""", loom_id)
        # The App's modules (no bundler: each import a request): how many, and when the last one came.
        scripts = page.evaluate("""() => performance.getEntriesByType("resource").filter((e) => e.name.endsWith(".js"))
            .map((e) => ({ end: e.responseEnd, cached: e.transferSize === 0 }))""")
        out["open_scripts"] = len(scripts)
        out["open_scripts_cached"] = sum(1 for x in scripts if x["cached"])
        out["open_scripts_end_ms"] = max((x["end"] for x in scripts), default=None)

        step(n, "edit in the page")
        page.locator(f"#node-{first_child}").click()
        expect(page.locator(f"#node-{first_child}")).to_have_attribute("aria-selected", "true")
        page.get_by_role("button", name="Edit", exact=True).click()
        new_text = f"Edited in round {index}: the keeper wrote this line."
        page.locator("dialog textarea").fill(new_text)
        check = f"[...document.querySelectorAll('.tree-text')].some((e) => e.textContent === {json.dumps(new_text)})"
        out["edit_ms"] = page.evaluate(CLICK_UNTIL, ["dialog", "Save", check])
        out["edit_answer_ms"] = last_resource_ms(page, f"/nodes/{first_child}")

        step(n, "another client's change")
        out["other_client_ms"] = [other_change(served, api, page, loom_id, leaves[-1], n - 1)]

        step(n, "sibling in the page")
        page.get_by_role("button", name="Sibling", exact=True).click()
        page.locator("dialog textarea").fill(f"A sibling written in round {index}.")
        out["sibling_ms"] = page.evaluate(CLICK_UNTIL, ["dialog", "Add sibling", f"loomBench.count() === {n}"])
        out["sibling_answer_ms"] = last_resource_ms(page, "/sibling")

        step(n, "a Branch in the page and its stream")  # after a delete: room for its Node (at most 2,000)
        out["other_client_ms"].append(other_change(served, api, page, loom_id, leaves[-2], n - 1))
        out.update(branch_stream(served, api, page, loom_id, ids[0], n, args))
        if errors:
            raise RuntimeError(f"the page failed: {errors}")
        return out
    finally:
        page.close()
        api.delete(f"/v1/looms/{loom_id}")


def step(n: int, what: str) -> None:
    print(f"[bench] {n} Nodes: {what}", flush=True)


def last_resource_ms(page: Any, tail: str) -> float | None:
    return page.evaluate("""(tail) => {
        const found = performance.getEntriesByType("resource").filter((e) => e.name.endsWith(tail));
        const last = found[found.length - 1];
        return last ? last.responseEnd - last.startTime : null; }""", tail)


def other_change(served: Served, api: Any, page: Any, loom_id: str, leaf: str, count: int) -> float:
    """The second client deletes `leaf`: ms from its answer to the frame that shows `count` Nodes."""
    page.evaluate(f"() => {{ window.loomBenchShown = loomBench.until(() => loomBench.count() === {count}); }}")
    answer(api.delete(f"/v1/looms/{loom_id}/nodes/{leaf}"))
    at = time.time() * 1000
    shown = page.evaluate("() => window.loomBenchShown")
    return shown["origin"] + shown["frame"] - at


def branch_stream(served: Served, api: Any, page: Any, loom_id: str, root: str, n: int,
                  args: argparse.Namespace) -> dict[str, Any]:
    """Branch (one Node, max_tokens 1,000) under the root in the page: ms from the click to the frame
    that shows its Node; then the Node selected (End in the tree: the last row), each token's time
    from the engine to the frame whose Text holds it, for `--stream-s` seconds."""
    from playwright.sync_api import expect

    page.locator(".tree").focus()
    page.keyboard.press("Home")  # the root's row: it may have scrolled out of the drawn window
    expect(page.locator(f"#node-{root}")).to_have_attribute("aria-selected", "true")
    page.get_by_label("Branches", exact=True).fill("1")
    page.get_by_label("Max tokens", exact=True).fill("1000")
    expect(page.get_by_role("button", name="Branch", exact=True)).to_be_enabled()
    branch_ms = page.evaluate(CLICK_UNTIL, [".branch-actions", "Branch", f"loomBench.count() === {n}"])
    page.evaluate("() => loomBench.record()")
    page.locator(".tree").focus()
    page.keyboard.press("End")
    selected = page.locator(".tree [aria-selected=true]")
    expect(selected).to_contain_text("Running")
    node_id = (selected.get_attribute("id") or "").removeprefix("node-")
    time.sleep(args.stream_s)
    page.evaluate("() => loomBench.stopRecording()")
    answer(api.post(f"/v1/looms/{loom_id}/cancel", json={}))
    page.wait_for_timeout(200)  # the last frames' ends
    events = [Seen(e["frame"] / 1000, e["text"]) for e in page.evaluate("() => loomBench.events") if e["frame"]]
    outputs = served.stack.client.of(uuid.UUID(node_id).hex)
    latencies = stream_latencies(outputs, events)
    return {"branch_ms": branch_ms, "branch_answer_ms": last_resource_ms(page, "/branch"),
            "stream_ms": [1000 * x for x in latencies], "stream_events": len(events), "engine_outputs": len(outputs)}


# -- the report --------------------------------------------------------------------------------------
def figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """p50 / p95 of each figure over the rounds (the stream's and the other client's, pooled)."""
    def of(values: list[float]) -> dict[str, float]:
        values = [v for v in values if v is not None]
        return {"p50": percentile(values, 0.5), "p95": percentile(values, 0.95), "count": len(values)} if values else {}

    return {
        "open_ms": of([r["open_ms"] for r in runs]),
        "open_before_read_ms": of([r["open_before_read_ms"] for r in runs]),
        "open_read_ms": of([r["open_read_ms"] for r in runs]),
        "open_after_read_ms": of([r["open_after_read_ms"] for r in runs]),
        "open_read_bytes": runs[0]["open_read_bytes"], "open_read_decoded_bytes": runs[0]["open_read_decoded_bytes"],
        "open_scripts": runs[0]["open_scripts"], "open_scripts_cached": runs[0]["open_scripts_cached"],
        "open_scripts_end_ms": of([r["open_scripts_end_ms"] for r in runs]),
        "edit_ms": of([r["edit_ms"] for r in runs]),
        "edit_answer_ms": of([r["edit_answer_ms"] for r in runs]),
        "sibling_ms": of([r["sibling_ms"] for r in runs]),
        "sibling_answer_ms": of([r["sibling_answer_ms"] for r in runs]),
        "other_client_ms": of([v for r in runs for v in r["other_client_ms"]]),
        "branch_ms": of([r["branch_ms"] for r in runs]),
        "branch_answer_ms": of([r["branch_answer_ms"] for r in runs]),
        "stream_ms": of([v for r in runs for v in r["stream_ms"]]),
    }


ROWS = (("open_ms", "open: navigation to the tree"), ("open_before_read_ms", "  the App's start to the read"),
        ("open_read_ms", "  the read of the Loom"), ("open_after_read_ms", "  the render after the read"),
        ("edit_ms", "edit in the page: Save to tree"), ("edit_answer_ms", "  of it the change's answer"),
        ("sibling_ms", "sibling in the page"), ("sibling_answer_ms", "  of it the change's answer"),
        ("branch_ms", "Branch in the page: its Node"), ("branch_answer_ms", "  of it the Branch's answer"),
        ("other_client_ms", "another client's change"), ("stream_ms", "Branch stream: token to Text"))


def print_report(out: dict[str, Any]) -> None:
    args, base, big = out["args"], out["baseline"], out["nodes"]
    print(f"Chromium {CHROMIUM}, {args['width']}x{args['height']}, {args['rounds']} rounds, "
          f"model {args['model']}, {os.cpu_count()} CPUs; ms, p50 / p95 (count)")
    print(f"{'':34}{args['baseline']:>22} {args['nodes']:>22} {'ratio p50 / p95':>16}")
    for name, label in ROWS:
        a, b = base[name], big[name]
        if not a or not b:
            print(f"{label:34}{'-':>22} {'-':>22}")
            continue
        cell = lambda f: f"{f['p50']:.1f} / {f['p95']:.1f} ({f['count']})"  # noqa: E731
        ratio = f"{b['p50'] / max(a['p50'], 1e-9):.2f} / {b['p95'] / max(a['p95'], 1e-9):.2f}"
        print(f"{label:34}{cell(a):>22} {cell(b):>22} {ratio:>16}")
    print(f"{'the read of the Loom, bytes':34}{base['open_read_decoded_bytes']:>22,} {big['open_read_decoded_bytes']:>22,}"
          f"  (gzip {base['open_read_bytes']:,} and {big['open_read_bytes']:,})")
    print(f"the App's modules at the open: {big['open_scripts']} scripts, {big['open_scripts_cached']} from the cache, "
          f"the last one in at p50 {base['open_scripts_end_ms']['p50']:.0f} and {big['open_scripts_end_ms']['p50']:.0f} ms")
    worst = out["other_cpu"]
    print(f"other processes' CPU, the worst round: {worst:.0%}")
    if worst > 0.10:
        print("WARNING: other processes used over 10% of the machine in a round: the figures are not a clean measurement")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--baseline", type=int, default=200, help="the same page with this many Nodes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stream-s", type=float, default=5.0, help="seconds of the Branch's stream a round")
    parser.add_argument("--width", type=int, default=1280, help="the viewport's width in CSS px (a phone: 390)")
    parser.add_argument("--height", type=int, default=800, help="the viewport's height in CSS px (a phone: 844)")
    add_stack_args(parser)
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    import httpx
    from playwright.sync_api import expect, sync_playwright

    from cluster.ray_env import prepare_ray_environment
    from deployments.vllm_runtime import prepare_environment

    prepare_environment(cpu=True)
    prepare_ray_environment()
    expect.set_options(timeout=WAIT_MS)
    sizes = (args.baseline, args.nodes)
    runs: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    other: list[float] = []
    with tempfile.TemporaryDirectory(prefix="acs-bench-loom-page-") as tmp:
        os.environ["TMPDIR"] = os.environ["VLLM_RPC_BASE_PATH"] = tmp
        served = Served(args, Path(tmp))
        try:
            with httpx.Client(base_url=served.root, headers={"Authorization": f"Bearer {served.key}"},
                              timeout=120, trust_env=False) as api, sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                context = browser.new_context(viewport={"width": args.width, "height": args.height})
                context.set_default_timeout(WAIT_MS)
                sign_in(context, served)
                try:
                    one_round(served, api, context, args.baseline, args, -1)  # warm-up: the cache, the JIT, the engine
                    for index in range(args.rounds):
                        for n in sizes if index % 2 == 0 else sizes[::-1]:
                            cpu = OtherCpu()
                            cpu.start()
                            runs[n].append(one_round(served, api, context, n, args, index))
                            other.append(cpu.stop())
                            print(f"[bench] round {index}, {n} Nodes: open {runs[n][-1]['open_ms']:.0f} ms, "
                                  f"other CPU {other[-1]:.0%}", flush=True)
                finally:
                    browser.close()
            # The figures before the stack stops: a failure there loses none of them.
            out = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                   "baseline": figures(runs[args.baseline]), "nodes": figures(runs[args.nodes]),
                   "other_cpu": max(other), "runs": {str(n): r for n, r in runs.items()}}
            print_report(out)
            if args.json:
                args.json.write_text(json.dumps(out, indent=2) + "\n")
        finally:
            served.close()
    return 0


def sign_in(context: Any, served: Served) -> None:
    """The App's session in the browser context: its cookies from POST /account/sign-in, with the
    CSRF header from the cookie, as the App's JS sends it."""
    r = context.request.get(f"{served.root}/account/csrf")
    if r.status != 204:
        raise RuntimeError(f"GET /account/csrf: HTTP {r.status}")
    token = next(c["value"] for c in context.cookies() if c["name"] == "acs_csrf")
    r = context.request.post(f"{served.root}/account/sign-in", data={"email": served.email, "password": PASSWORD},
                             headers={"X-CSRF-Token": token})
    if r.status != 200:
        raise RuntimeError(f"POST /account/sign-in: HTTP {r.status}: {r.text()[:300]}")


if __name__ == "__main__":
    sys.exit(main())
