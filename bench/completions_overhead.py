"""Overhead of our Completions path against vLLM's own OpenAI server.

    python bench/completions_overhead.py [--requests 200] [--concurrency 16]
        [--max-tokens 64] [--warmup 8] [--json out.json]

The same workload (non-streaming POST /v1/completions, temperature 0, a set
of short prompts) goes first through vLLM's OpenAI server on the model
folder, then through the platform (`python -m cluster.embedded`: Ray Serve,
the FastAPI ingress, the ledger, the model deployment with vLLM AsyncLLM and
vllm-lens) on the same folder, with the same engine arguments. The two
servers run one after the other, never together, each in its own
subprocess. It prints each side's throughput and p50/p90 latency, the
throughput ratio (ours / vLLM's) and the p50 latency we add.

Both sides must generate about the same number of tokens (usage
`completion_tokens`, within 5%), or the comparison means nothing and the
run fails.

For ours it also reads each timed answer's `Server-Timing` header (domain/timing.py)
and prints the median of each stage, and of what no stage covers. For both sides it
prints the CPU each process role spent per timed request and at idle (`--idle`
seconds after the warmup; bench/process_cpu.py): on 2 cores the serving path's CPU is
taken from the engine's threads.

`--stream` sends the same workload with `"stream": true` (and
`stream_options.include_usage`, for the token count) and notes at the client
when each SSE event that carries text arrives: the time to first token
(send to the first such event) and the gaps between them (inter-token
latency). The engine's decode step is the same on both sides, so what ours
adds to the TTFT and ITL over vLLM's is what our path adds between a token
leaving the engine and its event reaching the client.

`--model` and `--profile` pick another model of configs/models for both sides
(default: the embedded profile's SmolLM2-135M on the CPU); bench/gpu.sh runs
issue 14's part 5 this way on a GPU, with the random-weight Llama at the 8B
shape. vLLM's side runs eager with the vllm-lens plugin loaded (it loads in
every vLLM process of this environment), as ours does, unless `--vllm-stock`:
then vLLM's server runs as it ships, without the plugin and not eager (on a
GPU it compiles and captures CUDA graphs), and the ratio holds what vllm-lens's
eager steps cost ours as well.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from cluster.ray_env import prepare_ray_environment  # noqa: E402
from deployments.vllm_runtime import prepare_environment  # noqa: E402
from bench.proc import proc_stat_fields  # noqa: E402
from bench.process_cpu import ProcessCpu  # noqa: E402
from domain.timing import ENGINE_STAGES, parse as parse_server_timing  # noqa: E402
from ledger.store.pg_admin import ADMIN_DSN, drop_database, recreate_database, sqlalchemy_url  # noqa: E402

MODEL_ID = "smollm2-135m"  # the embedded profile's default
PROFILE = "embedded"
TOKEN_TOLERANCE = 0.05
OTHER_CPU_WARN = 0.10
BENCH_DATABASE = "acs_bench_overhead"  # --ledger postgresql: made for ours' side, dropped after
KEY_LINE = re.compile(r"export ACS_API_KEY=(\S+)")

SUBJECTS = [
    "France", "Germany", "Italy", "Spain", "Japan", "Canada", "Brazil", "Egypt",
    "Kenya", "India", "China", "Mexico", "Norway", "Sweden", "Poland", "Greece",
    "Portugal", "Argentina", "Australia", "Turkey", "Peru", "Chile", "Ireland", "Austria",
]
TEMPLATES = [
    "The capital of {} is", "The largest city in {} is", "{} is a country known for",
    "The official language of {} is",
]
PROMPTS = [t.format(s) for t in TEMPLATES for s in SUBJECTS]


# -- results --------------------------------------------------------------------
@dataclass
class Sample:
    latency_s: float
    prompt_tokens: int
    completion_tokens: int
    text: str
    stages: dict[str, float] | None = None  # ours: the Server-Timing header, in ms
    ttft_s: float | None = None  # --stream: send to the first event carrying text
    itl_s: list[float] = field(default_factory=list)  # --stream: gaps between such events


@dataclass
class SideResult:
    name: str
    requests: int
    elapsed_s: float
    prompt_tokens: int
    completion_tokens: int
    req_per_s: float
    tok_per_s: float
    p50_ms: float
    p90_ms: float
    startup_s: float
    other_cpu: float  # share of the machine's CPU that other processes used meanwhile
    stages_p50_ms: dict[str, float] = field(default_factory=dict)  # ours: Server-Timing medians
    stages_p90_ms: dict[str, float] = field(default_factory=dict)  # ... and their p90: a wait's tail
    stream: dict[str, float] = field(default_factory=dict)  # --stream: TTFT and ITL percentiles, in ms
    cpu: dict[str, Any] = field(default_factory=dict)  # core-seconds by process role (bench/process_cpu.py)
    idle_cpu: dict[str, Any] = field(default_factory=dict)  # the same with no request in flight (--idle)
    texts: dict[int, str] = field(default_factory=dict, repr=False)


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


UNTIMED = "untimed"  # total less every stage of the ingress: what no stage covers


def stage_percentiles(samples: list[Sample], q: float) -> dict[str, float]:
    """The `q` percentile of each Server-Timing stage over the answers that had it, in ms."""
    values: dict[str, list[float]] = {}
    for s in samples:
        if not s.stages:
            continue
        stages = dict(s.stages)
        if "total" in stages:
            top = sum(ms for name, ms in stages.items() if name not in (*ENGINE_STAGES, "total"))
            stages[UNTIMED] = max(stages["total"] - top, 0.0)
        for name, ms in stages.items():
            values.setdefault(name, []).append(ms)
    return {name: round(percentile(ms, q), 3) for name, ms in values.items()}


def summarize(name: str, samples: list[Sample], elapsed: float, startup: float, other_cpu: float,
              cpu: dict[str, Any]) -> SideResult:
    latencies = [s.latency_s for s in samples]
    completion = sum(s.completion_tokens for s in samples)
    return SideResult(
        name=name, requests=len(samples), elapsed_s=round(elapsed, 3),
        prompt_tokens=sum(s.prompt_tokens for s in samples), completion_tokens=completion,
        req_per_s=len(samples) / elapsed, tok_per_s=completion / elapsed,
        p50_ms=percentile(latencies, 0.5) * 1000, p90_ms=percentile(latencies, 0.9) * 1000,
        startup_s=round(startup, 1), other_cpu=round(other_cpu, 3), stages_p50_ms=stage_percentiles(samples, 0.5),
        stages_p90_ms=stage_percentiles(samples, 0.9),
        texts={i % len(PROMPTS): s.text for i, s in enumerate(samples)},
        stream=stream_figures(samples), cpu=cpu,
    )


def stream_figures(samples: list[Sample]) -> dict[str, float]:
    """TTFT over the requests and ITL over every gap of every request: p50 / p90, in ms."""
    ttft = [s.ttft_s for s in samples if s.ttft_s is not None]
    if not ttft:
        return {}
    itl = [gap for s in samples for gap in s.itl_s]
    out = {"ttft_p50_ms": percentile(ttft, 0.5) * 1000, "ttft_p90_ms": percentile(ttft, 0.9) * 1000,
           "token_events": len(itl) + len(ttft)}
    if itl:
        # One request's mean gap (first token event to last, over the gaps): unlike single gaps it
        # does not read 0 when events arrive in bursts (several in one read at the client).
        per_request = [sum(s.itl_s) / len(s.itl_s) for s in samples if s.itl_s]
        out |= {"itl_p50_ms": percentile(itl, 0.5) * 1000, "itl_p90_ms": percentile(itl, 0.9) * 1000,
                "itl_mean_ms": sum(itl) / len(itl) * 1000,
                "req_itl_p50_ms": percentile(per_request, 0.5) * 1000,
                "req_itl_p90_ms": percentile(per_request, 0.9) * 1000,
                "burst_share": sum(gap < 0.001 for gap in itl) / len(itl)}
    return out


# -- the workload -----------------------------------------------------------------
class RequestFailed(RuntimeError):
    pass


def completion_body(model: str, i: int, max_tokens: int) -> dict[str, Any]:
    return {"model": model, "prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": max_tokens, "temperature": 0}


async def one_request(client: Any, model: str, i: int, max_tokens: int) -> Sample:
    start = time.perf_counter()
    response = await client.post("/completions", json=completion_body(model, i, max_tokens))
    latency = time.perf_counter() - start
    if response.status_code != 200:
        raise RequestFailed(f"request {i}: HTTP {response.status_code}: {response.text[:500]}")
    data = response.json()
    usage = data["usage"]
    timing = response.headers.get("server-timing")
    return Sample(latency, usage["prompt_tokens"], usage["completion_tokens"], data["choices"][0]["text"],
                  parse_server_timing(timing) if timing else None)


async def one_stream(client: Any, model: str, i: int, max_tokens: int) -> Sample:
    """The same request as a stream; each event carrying text is timed as it arrives."""
    body = {**completion_body(model, i, max_tokens), "stream": True, "stream_options": {"include_usage": True}}
    start = time.perf_counter()
    arrivals: list[float] = []
    parts: list[str] = []
    usage: dict[str, int] | None = None
    async with client.stream("POST", "/completions", json=body) as response:
        if response.status_code != 200:
            raise RequestFailed(f"request {i}: HTTP {response.status_code}: {(await response.aread())[:500]!r}")
        timing = response.headers.get("server-timing")
        async for line in response.aiter_lines():
            now = time.perf_counter()
            if not line.startswith("data:"):
                continue  # blank separators, keep-alive comments
            payload = line[5:].strip()
            if payload == "[DONE]":
                break
            event = json.loads(payload)
            if "error" in event:
                raise RequestFailed(f"request {i}: error event: {payload[:500]}")
            if event.get("usage"):
                usage = event["usage"]
            text = "".join(c.get("text") or "" for c in event.get("choices") or [])
            if text:
                arrivals.append(now)
                parts.append(text)
    latency = time.perf_counter() - start
    if usage is None:
        raise RequestFailed(f"request {i}: the stream carried no usage chunk")
    return Sample(latency, usage["prompt_tokens"], usage["completion_tokens"], "".join(parts),
                  parse_server_timing(timing) if timing else None,
                  ttft_s=arrivals[0] - start if arrivals else None,
                  itl_s=[b - a for a, b in zip(arrivals, arrivals[1:])])


async def run_load(client: Any, model: str, count: int, concurrency: int, max_tokens: int,
                   stream: bool = False) -> tuple[list[Sample], float]:
    """`count` requests by `concurrency` workers; samples in request order, and wall seconds."""
    samples: list[Sample | None] = [None] * count
    next_index = iter(range(count))
    send = one_stream if stream else one_request

    async def worker() -> None:
        for i in next_index:
            samples[i] = await send(client, model, i, max_tokens)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, count))))
    return [s for s in samples if s is not None], time.perf_counter() - start


def http_client(base: str, key: str | None, concurrency: int) -> Any:
    import httpx

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    # trust_env off: a proxy from the environment must not sit between us and 127.0.0.1.
    return httpx.AsyncClient(base_url=base, headers=headers, limits=limits, timeout=600, trust_env=False)


async def measure(base: str, key: str | None, model: str, args: argparse.Namespace,
                  probe: OtherLoad) -> tuple[list[Sample], float]:
    async with http_client(base, key, args.concurrency) as client:
        if args.warmup:
            await run_load(client, model, args.warmup, args.concurrency, args.max_tokens, args.stream)
        if args.idle:
            # What the server burns with no request in flight: a cost that every request pays on 2 cores.
            probe.idle.start()
            await asyncio.sleep(args.idle)
            probe.idle_by_role = probe.idle.stop()
        probe.start()
        return await run_load(client, model, args.requests, args.concurrency, args.max_tokens, args.stream)


# -- server processes ---------------------------------------------------------------
def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def descendants(root: int) -> list[int]:
    """Live pids below `root` in the process tree."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        fields = proc_stat_fields(entry.name) if entry.name.isdigit() else None
        if fields is not None and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def become_subreaper() -> None:
    """Orphans of this process's descendants (a server's Ray daemons after its driver exits) come
    to this process instead of init, so that `descendants(os.getpid())` still finds them."""
    import ctypes

    pr_set_child_subreaper = 36
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def session_members(sid: int) -> list[int]:
    """Pids whose session is `sid`: the server and everything it started (Ray's setpgrp keeps the session)."""
    pids = []
    for entry in Path("/proc").iterdir():
        fields = proc_stat_fields(entry.name) if entry.name.isdigit() else None
        if fields is None:
            continue
        if int(fields[3]) == sid and fields[0] != "Z" and int(entry.name) != os.getpid():
            pids.append(int(entry.name))
    return pids




class OtherLoad:
    """CPU that processes other than the bench and its server used while it measured.

    Anything else on the machine (a test run, a build) distorts the figures,
    vLLM's far more than ours: its engine's OpenMP threads are pinned to
    every core and stall when one is taken.
    """

    def __init__(self, members: Callable[[], list[int]]) -> None:
        self.members = members
        self.processes = ProcessCpu(members)
        self.idle = ProcessCpu(members)
        self.idle_by_role: dict[str, Any] = {}

    def _ours(self) -> int:
        total = 0
        for pid in [*self.members(), os.getpid()]:
            fields = proc_stat_fields(pid)
            if fields is not None:
                # utime + stime, and the same for its reaped children (Ray runs short-lived helpers)
                total += sum(int(v) for v in fields[11:15])
        return total

    @staticmethod
    def _busy() -> int:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        return values[0] + values[1] + values[2]  # user, nice, system: what processes use

    def start(self) -> None:
        self.processes.start()
        self.t0, self.busy0, self.ours0 = time.monotonic(), self._busy(), self._ours()

    def stop(self) -> float:
        """Share of the machine's CPU time (0..1) used by others since start."""
        self.by_role = self.processes.stop()
        other = (self._busy() - self.busy0) - (self._ours() - self.ours0)
        available = (time.monotonic() - self.t0) * os.sysconf("SC_CLK_TCK") * (os.cpu_count() or 1)
        return max(0.0, other / available)


class Server:
    """One server subprocess, logging to a file."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], log_path: Path,
                 own_session: bool = True) -> None:
        """`own_session`: the server and all it starts in a session of their own, found by it. Without
        it they stay in this process's session, and so in its scheduler autogroup: with
        kernel.sched_autogroup_enabled, a server in a session of its own is a group of its own
        that shares the CPUs with this process's group as one, and its engine's busy threads left
        the bench's client waiting for the CPU for hundreds of milliseconds (bench/NOTES.md,
        "The bench's client and the scheduler's autogroups"); then they are found as this
        process's descendants."""
        self.name, self.log_path, self.own_session = name, log_path, own_session
        self.log = open(log_path, "wb")
        self.started = time.monotonic()
        if not own_session:
            become_subreaper()
        self.proc = subprocess.Popen(cmd, env=env, cwd=REPO_ROOT, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=own_session,
                                     process_group=None if own_session else 0)

    def members(self) -> list[int]:
        """The server's live processes: itself and everything it started."""
        if self.own_session:
            return session_members(self.proc.pid)
        return [self.proc.pid, *descendants(self.proc.pid)] if self.proc.poll() is None else []

    def _leftovers(self) -> list[int]:
        if self.own_session:
            return session_members(self.proc.pid)
        return descendants(os.getpid())  # one server at a time: the rest are its orphans

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; log tail:\n{self.tail()}")

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def stop(self, timeout: float) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                print(f"[bench] {self.name} did not stop in {timeout:.0f} s after SIGTERM; killing it", flush=True)
                self.proc.kill()
                self.proc.wait()
        self._kill_leftovers()
        self.log.close()

    def _kill_leftovers(self, grace: float = 5.0) -> None:
        """Whatever the server started and left behind: a grace period, SIGTERM, then SIGKILL."""
        killed: set[int] = set()
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            leftovers = self._leftovers()
            if sig is not None:
                killed.update(signal_each(leftovers, sig))
            deadline = time.monotonic() + grace
            while leftovers and time.monotonic() < deadline:
                time.sleep(0.2)
                leftovers = self._leftovers()
            if not leftovers:
                break
        if killed:
            print(f"[bench] {self.name}: ended {len(killed)} leftover process(es): {sorted(killed)}", flush=True)


def signal_each(pids: list[int], sig: int) -> list[int]:
    sent = []
    for pid in pids:
        try:
            os.kill(pid, sig)
            sent.append(pid)
        except ProcessLookupError:
            pass
    return sent


def wait_until(server: Server, ready: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        server.check_alive()
        if ready():
            return
        time.sleep(1)
    raise TimeoutError(f"{server.name}: {what} not within {timeout:.0f} s; log tail:\n{server.tail()}")


def get_ok(url: str, key: str | None = None) -> dict[str, Any] | None:
    import httpx

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        response = httpx.get(url, headers=headers, timeout=10, trust_env=False)
    except httpx.HTTPError:
        return None
    return response.json() if response.status_code == 200 else None


def base_env(tmp: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    # vLLM puts its ipc sockets (and Ray its session) in the temp dir: keep them in ours.
    return {**(os.environ if environ is None else environ), "TMPDIR": str(tmp), "VLLM_RPC_BASE_PATH": str(tmp),
            "PYTHONUNBUFFERED": "1"}


def vllm_extra_env(args: argparse.Namespace) -> dict[str, str]:
    """vLLM's server's environment beyond ours': --vllm-stock's switch of vllm-lens, then --vllm-env."""
    # vllm-lens loads in every vLLM process of the environment and forces eager mode: its switch off.
    stock = {"VLLM_LENS_DISABLE": "1"} if args.vllm_stock else {}
    return {**stock, **dict(item.split("=", 1) for item in args.vllm_env)}


# -- vLLM's own server ----------------------------------------------------------------
def engine_flags(engine_args: dict[str, Any], eager: bool = True) -> list[str]:
    """Our engine's arguments (configs/models + deployments/vllm_engine defaults) as CLI flags;
    `eager` as vllm-lens makes our engine, or vLLM's default (CUDA graphs on a GPU)."""
    args = dict(engine_args)
    args.setdefault("max_logprobs", -1)
    args.setdefault("scheduling_policy", "priority")
    args.setdefault("distributed_executor_backend", "uni")
    flags = []
    for key, value in args.items():
        flags += [f"--{key.replace('_', '-')}", str(value)]
    return flags + (["--enforce-eager"] if eager else [])


def vllm_command(model_dir: str, port: int, engine_args: dict[str, Any], one_gloo_device: bool = False,
                 model: str = MODEL_ID, eager: bool = True) -> list[str]:
    """vLLM's own server on `model_dir`, answering to `model` (the id both sides are asked for)."""
    # Our engine shares one gloo device among its process groups (deployments/gloo_device.py);
    # stock vLLM does not, unless asked.
    extension = ["--worker-extension-cls", "bench.vllm_one_gloo_device.OneGlooDevice"] if one_gloo_device else []
    return [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", model_dir, "--tokenizer", model_dir, "--served-model-name", model,
        "--host", "127.0.0.1", "--port", str(port), *engine_flags(engine_args, eager), *extension,
    ]


def start_vllm(args: argparse.Namespace, tmp: Path, engine_args: dict[str, Any]) -> tuple[Server, str, None]:
    cmd = vllm_command(args.model_dir, args.vllm_port, engine_args, args.vllm_one_gloo_device,
                       model=args.model, eager=not args.vllm_stock)
    print("[bench] vllm:", " ".join(cmd[1:]), flush=True)
    extra = vllm_extra_env(args)
    server = Server("vllm", cmd, {**base_env(tmp), **extra}, tmp / "vllm.log", own_session=False)
    base = f"http://127.0.0.1:{args.vllm_port}/v1"
    wait_until(server, lambda: get_ok(f"{base}/models") is not None, args.start_timeout, "GET /v1/models")
    return server, base, None


# -- our platform -----------------------------------------------------------------------
def found_key(server: Server) -> str | None:
    match = KEY_LINE.search(server.log_text())
    return match.group(1) if match else None


def ours_ready(base: str, key: str, model: str = MODEL_ID) -> bool:
    if get_ok(f"{base}/models", key) is None:
        return False
    status = get_ok(f"{base}/models/{model}/status", key)
    return bool(status and status.get("warm"))


def start_ours(args: argparse.Namespace, tmp: Path) -> tuple[Server, str, str]:
    return start_embedded(args.ours_port, tmp, args.start_timeout, own_session=False,
                          ledger_url=ours_ledger_url(args, tmp), profile=args.profile, model=args.model)


def start_embedded(port: int, tmp: Path, start_timeout: float, environ: dict[str, str] | None = None,
                   own_session: bool = True, ledger_url: str | None = None, profile: str = PROFILE,
                   model: str = MODEL_ID) -> tuple[Server, str, str]:
    """`python -m cluster.embedded` of `profile` on `port` over a SQLite ledger in `tmp` (or
    `ledger_url`), `model` warm: the server, its /v1 address and the local user's key. `environ`
    replaces os.environ."""
    env = {**base_env(tmp, environ), "ACS_DATABASE_URL": ledger_url or embedded_ledger_url(tmp),
           "ACS_PROFILE": profile}
    cmd = [sys.executable, "-m", "cluster.embedded", "--port", str(port)]
    print("[bench] ours:", " ".join(cmd[1:]), flush=True)
    server = Server("ours", cmd, env, tmp / "ours.log", own_session=own_session)
    base = f"http://127.0.0.1:{port}/v1"
    wait_until(server, lambda: found_key(server) is not None, start_timeout, "the API key line")
    key = found_key(server)
    if key.startswith("("):
        raise RuntimeError(f"ours printed no key: {key}")
    remaining = start_timeout - (time.monotonic() - server.started)
    wait_until(server, lambda: ours_ready(base, key, model), max(remaining, 1), f"{model} warm")
    return server, base, key


def embedded_ledger_url(tmp: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp / 'acs.db'}"


def bench_ledger_url(args: argparse.Namespace, tmp: Path) -> str:
    """Ours' ledger: the embedded default's SQLite file in `tmp`, or (`--ledger postgresql`) the
    bench's database on `--admin-dsn`'s server."""
    if args.ledger == "sqlite":
        return embedded_ledger_url(tmp)
    return sqlalchemy_url(args.admin_dsn, BENCH_DATABASE)


def ours_ledger_url(args: argparse.Namespace, tmp: Path) -> str:
    """bench_ledger_url, its PostgreSQL database made new (cluster.embedded migrates either)."""
    if args.ledger == "postgresql":
        asyncio.run(recreate_database(args.admin_dsn, BENCH_DATABASE))
    return bench_ledger_url(args, tmp)


def remove_bench_ledger(args: argparse.Namespace, tmp: Path) -> None:
    """The key file cluster.embedded keeps per ledger, and the PostgreSQL database: the bench's are temporary."""
    remove_key_file(bench_ledger_url(args, tmp))
    if args.ledger == "postgresql":
        asyncio.run(drop_database(args.admin_dsn, BENCH_DATABASE))


def remove_bench_key_file(tmp: Path) -> None:
    """cluster.embedded keeps one key file per ledger; the bench's ledger is temporary."""
    remove_key_file(embedded_ledger_url(tmp))


def remove_key_file(ledger_url: str) -> None:
    from cluster.embedded import key_file

    key_file(ledger_url).unlink(missing_ok=True)


# -- one side, start to stop ---------------------------------------------------------------
def run_side(name: str, start: Callable[[], tuple[Server, str, str | None]], args: argparse.Namespace) -> SideResult:
    server = None
    t0 = time.monotonic()
    try:
        server, base, key = start()
        startup = time.monotonic() - t0
        print(f"[bench] {name} ready after {startup:.0f} s; warmup {args.warmup}, then {args.requests} requests", flush=True)
        probe = OtherLoad(server.members)
        try:
            samples, elapsed = asyncio.run(measure(base, key, args.model, args, probe))
        except RequestFailed as error:
            raise RuntimeError(f"{name}: {error}; server log tail:\n{server.tail()}") from error
        result = summarize(name, samples, elapsed, startup, probe.stop(), probe.by_role)
        result.idle_cpu = probe.idle_by_role
        return result
    finally:
        if server is not None:
            server.stop(args.stop_timeout)


# -- report -------------------------------------------------------------------------------------
def side_line(r: SideResult) -> str:
    return (f"{r.name + ':':6} throughput {r.req_per_s:.2f} req/s ({r.tok_per_s:.1f} tok/s) "
            f"p50 {r.p50_ms:.0f} ms p90 {r.p90_ms:.0f} ms")


def stream_line(r: SideResult) -> str:
    f = r.stream
    line = f"{r.name + ':':6} TTFT p50 {f['ttft_p50_ms']:.1f} ms p90 {f['ttft_p90_ms']:.1f} ms"
    if "itl_p50_ms" in f:
        line += (f"; ITL p50 {f['itl_p50_ms']:.1f} ms p90 {f['itl_p90_ms']:.1f} ms mean {f['itl_mean_ms']:.1f} ms"
                 f"; per-request mean ITL p50 {f['req_itl_p50_ms']:.1f} ms p90 {f['req_itl_p90_ms']:.1f} ms"
                 f"; gaps under 1 ms {f['burst_share']:.0%}")
    return line + f" ({f['token_events']} token events)"


def cpu_line(r: SideResult) -> str:
    """Core-milliseconds per request by process role, while the timed requests ran."""
    per_request = {role: s * 1000 / r.requests for role, s in r.cpu["core_s"].items()}
    threads = r.cpu["engine_threads_cores"]
    return (f"{r.name} CPU per request (core-ms): "
            + ", ".join(f"{role} {ms:.0f}" for role, ms in per_request.items())
            + f"; all {sum(per_request.values()):.0f}; EngineCore threads at work: {len(threads)} ("
            + ", ".join(f"{cores:.2f}" for cores in sorted(threads.values(), reverse=True)) + " cores)")


def idle_line(r: SideResult) -> str:
    seconds = r.idle_cpu["elapsed_s"]
    shares = {role: s / seconds for role, s in r.idle_cpu["core_s"].items() if s / seconds >= 0.001}
    return (f"{r.name} CPU while idle ({seconds:.0f} s, share of one core): "
            + ", ".join(f"{role} {share:.1%}" for role, share in shares.items())
            + f"; all {sum(shares.values()):.1%}")


def stages_line(r: SideResult, label: str, stages: dict[str, float]) -> str:
    return f"{r.name} Server-Timing {label} (ms): " + ", ".join(f"{name} {ms:.2f}" for name, ms in stages.items())


def compare(ours: SideResult, vllm: SideResult) -> dict[str, Any]:
    larger = max(ours.completion_tokens, vllm.completion_tokens, 1)
    return {
        "throughput_ratio": ours.req_per_s / vllm.req_per_s,
        "added_p50_ms": ours.p50_ms - vllm.p50_ms,
        "added_p90_ms": ours.p90_ms - vllm.p90_ms,
        "completion_tokens_diff": abs(ours.completion_tokens - vllm.completion_tokens) / larger,
        "prompts_with_different_text": sum(
            ours.texts.get(i) != text for i, text in vllm.texts.items()
        ),
    }


def report(args: argparse.Namespace, sides: dict[str, SideResult]) -> dict[str, Any]:
    print(f"\ncompletions_overhead: requests={args.requests} concurrency={args.concurrency} "
          f"max_tokens={args.max_tokens}" + (" stream" if args.stream else ""))
    for name in ("vllm", "ours"):
        if name in sides:
            print(side_line(sides[name]))
    if args.stream:
        for name in ("vllm", "ours"):
            if name in sides and sides[name].stream:
                print(stream_line(sides[name]))
    for r in sides.values():
        if r.stages_p50_ms:
            print(stages_line(r, "medians", r.stages_p50_ms))
            print(stages_line(r, "p90", r.stages_p90_ms))
    for r in sides.values():
        if r.cpu:
            print(cpu_line(r))
        if r.idle_cpu:
            print(idle_line(r))
    out: dict[str, Any] = {
        "requests": args.requests, "concurrency": args.concurrency, "max_tokens": args.max_tokens,
        "warmup": args.warmup, "model": args.model, "profile": args.profile, "model_dir": args.model_dir,
        "vllm_env": args.vllm_env, "vllm_stock": args.vllm_stock,
        "vllm_one_gloo_device": args.vllm_one_gloo_device, "stream": args.stream,
        **{name: {k: v for k, v in asdict(r).items() if k != "texts"} for name, r in sides.items()},
    }
    print("other processes' CPU while measuring: "
          + ", ".join(f"{r.name} {r.other_cpu:.0%}" for r in sides.values()))
    for r in sides.values():
        if r.other_cpu > OTHER_CPU_WARN:
            print(f"WARNING: other processes used {r.other_cpu:.0%} of the CPUs while {r.name} was measured; "
                  "its figures are not a clean measurement")
    if len(sides) == 2:
        cmp = compare(sides["ours"], sides["vllm"])
        print(f"ratio (ours/vllm throughput): {cmp['throughput_ratio']:.2f}   added p50: {cmp['added_p50_ms']:.0f} ms")
        print(f"completion tokens: vllm {sides['vllm'].completion_tokens} ours {sides['ours'].completion_tokens} "
              f"(diff {cmp['completion_tokens_diff']:.1%}); prompt tokens: vllm {sides['vllm'].prompt_tokens} "
              f"ours {sides['ours'].prompt_tokens}; prompts whose text differs: {cmp['prompts_with_different_text']}")
        if args.stream and sides["ours"].stream and sides["vllm"].stream:
            o, v = sides["ours"].stream, sides["vllm"].stream
            ratios = {k: o[k] / v[k] for k in ("ttft_p50_ms", "ttft_p90_ms", "itl_p50_ms", "itl_p90_ms",
                                                      "req_itl_p50_ms", "req_itl_p90_ms")
                      if k in o and k in v and v[k] > 0}
            cmp["stream_ratios"] = ratios
            print("stream ratios (ours/vllm): "
                  + ", ".join(f"{k.removesuffix('_ms').replace('_', ' ')} {x:.3f}" for k, x in ratios.items())
                  + f"; added TTFT p50 {o['ttft_p50_ms'] - v['ttft_p50_ms']:+.1f} ms"
                  + (f", added ITL p50 {o['itl_p50_ms'] - v['itl_p50_ms']:+.1f} ms" if "itl_p50_ms" in ratios else ""))
            print("the engine's decode step is the same on both sides: what ours adds to TTFT and ITL over "
                  "vLLM's is what our path adds between a token leaving the engine and its event reaching the client "
                  "(caveat: our engine's step is slower while the platform's other processes take CPU: see the CPU lines)")
            print(f"goal (within 10% of vLLM's): " + ", ".join(
                f"{k.removesuffix('_ms').replace('_', ' ')} {'met' if x <= 1.10 else 'not met'}"
                for k, x in ratios.items()))
        out["comparison"] = cmp
    return out


def remove_sockets(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_socket():
            path.unlink(missing_ok=True)


# -- main -----------------------------------------------------------------------------------------
def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--warmup", type=int, default=8, help="untimed requests on each server first")
    p.add_argument("--model", default=MODEL_ID, help="the model of configs/models both sides serve (default %(default)s)")
    p.add_argument("--profile", default=PROFILE, help="ours' profile, which must hold --model (default %(default)s)")
    p.add_argument("--model-dir", help="folder vLLM's server loads (default: --model's own)")
    p.add_argument("--vllm-stock", action="store_true",
                   help="vLLM's server as it ships: no vllm-lens plugin (VLLM_LENS_DISABLE=1), no --enforce-eager "
                        "(CUDA graphs on a GPU), against ours' eager steps")
    p.add_argument("--ours-port", type=int, default=18431)
    p.add_argument("--vllm-port", type=int, default=18432)
    p.add_argument("--skip-ours", action="store_true")
    p.add_argument("--skip-vllm", action="store_true")
    p.add_argument("--start-timeout", type=float, default=900, help="seconds for a server to become ready")
    p.add_argument("--stop-timeout", type=float, default=120, help="seconds after SIGTERM before SIGKILL")
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--vllm-env", action="append", default=[], metavar="KEY=VALUE",
                   help="extra environment for vLLM's server only (repeatable), for experiments")
    p.add_argument("--vllm-one-gloo-device", action="store_true",
                   help="give vLLM's server our engine's one gloo device too (bench/vllm_one_gloo_device.py): "
                        "the ratio is then the platform's path alone")
    p.add_argument("--keep-logs", action="store_true", help="keep the temp dir with the server logs")
    p.add_argument("--idle", type=float, default=10,
                   help="seconds after the warmup with no request, to measure each server's idle CPU (0: skip)")
    p.add_argument("--rounds", type=int, default=1,
                   help="run both sides this many times, alternating which goes first; print each round's ratio and the median")
    p.add_argument("--stream", action="store_true",
                   help="stream the completions; print time to first token and inter-token latency")
    p.add_argument("--ledger", choices=("sqlite", "postgresql"), default="sqlite",
                   help=f"ours' ledger: the embedded default's SQLite file, or a new PostgreSQL database "
                        f"{BENCH_DATABASE!r} on --admin-dsn's server, dropped after")
    p.add_argument("--admin-dsn", default=ADMIN_DSN,
                   help="asyncpg DSN of a database to connect to while making ours (ACS_TEST_PG_ADMIN_URL)")
    args = p.parse_args()
    if args.requests < 1 or args.concurrency < 1 or args.max_tokens < 1 or args.warmup < 0 or args.idle < 0 \
            or args.rounds < 1:
        p.error("--requests, --concurrency, --max-tokens and --rounds must be >= 1, --warmup and --idle >= 0")
    if any("=" not in item for item in args.vllm_env):
        p.error("--vllm-env takes KEY=VALUE")
    if args.skip_ours and args.skip_vllm:
        p.error("nothing to run with both --skip-ours and --skip-vllm")
    return args


def engine_setup(args: argparse.Namespace) -> dict[str, Any]:
    """--model's engine arguments for vLLM's side, with vLLM's process settings for its device."""
    from deployments.catalog import load_catalog

    catalog = load_catalog(args.profile)
    if args.model not in catalog.models:
        sys.exit(f"profile {args.profile!r} does not serve {args.model!r} (it serves {', '.join(catalog.models)})")
    spec = catalog.models[args.model]
    prepare_environment(cpu=spec.on_cpu)  # VLLM_ENABLE_V1_MULTIPROCESSING=0 etc., inherited by both servers
    args.model_dir = str((REPO_ROOT / (args.model_dir or spec.weights_path())).resolve())
    if Path(spec.weights_path()).resolve() != Path(args.model_dir):
        print(f"[bench] WARNING: ours serves {spec.weights_path()}, vLLM gets {args.model_dir}", flush=True)
    return spec.engine.engine_args()


def check_ports(args: argparse.Namespace) -> None:
    for skip, port in ((args.skip_ours, args.ours_port), (args.skip_vllm, args.vllm_port)):
        if not skip and not port_free(port):
            sys.exit(f"port {port} is in use on 127.0.0.1; pick another (--ours-port / --vllm-port)")


def exit_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so the `finally` blocks stop the servers and clean up."""
    def handler(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


def run_round(args: argparse.Namespace, tmp: Path, engine_args: dict[str, Any],
              order: tuple[str, ...]) -> dict[str, SideResult]:
    """Each side started fresh, measured and stopped, in `order`: only one server runs at a time."""
    tmp.mkdir(parents=True, exist_ok=True)
    sides: dict[str, SideResult] = {}
    for name in order:
        if name == "vllm" and not args.skip_vllm:
            sides["vllm"] = run_side("vllm", lambda: start_vllm(args, tmp, engine_args), args)
        if name == "ours" and not args.skip_ours:
            try:
                sides["ours"] = run_side("ours", lambda: start_ours(args, tmp), args)
            finally:
                remove_bench_ledger(args, tmp)
    return {name: sides[name] for name in ("vllm", "ours") if name in sides}


def rounds_summary(outs: list[dict[str, Any]]) -> dict[str, Any]:
    """The same-run ratios of every round: on 2 cores one run moves by up to 15%, a median less."""
    ratios = [out["comparison"]["throughput_ratio"] for out in outs if "comparison" in out]
    added = [out["comparison"]["added_p50_ms"] for out in outs if "comparison" in out]
    summary: dict[str, Any] = {"throughput_ratios": ratios, "added_p50_ms": added}
    if ratios:
        summary.update(throughput_ratio_median=statistics.median(ratios), added_p50_ms_median=statistics.median(added))
        print(f"\n{len(ratios)} rounds, each side fresh in each (the order alternates): ratio (ours/vllm throughput) "
              + ", ".join(f"{r:.2f}" for r in ratios) + f"; median {summary['throughput_ratio_median']:.2f}; "
              f"added p50 median {summary['added_p50_ms_median']:.0f} ms")
    return summary


def main() -> int:
    args = parse_args()
    exit_on_sigterm()
    engine_args = engine_setup(args)
    prepare_ray_environment()
    check_ports(args)
    tmp = Path(tempfile.mkdtemp(prefix="acs-bench-"))
    outs: list[dict[str, Any]] = []
    failed = True
    try:
        for number in range(args.rounds):
            # Alternate which side goes first, so a drift of the machine's speed falls on both.
            order = ("vllm", "ours") if number % 2 == 0 else ("ours", "vllm")
            folder = tmp if args.rounds == 1 else tmp / f"round-{number + 1}"
            if args.rounds > 1:
                print(f"[bench] round {number + 1} of {args.rounds}: {' then '.join(order)}", flush=True)
            outs.append(report(args, run_round(args, folder, engine_args, order)))
        failed = False
    finally:
        if failed or args.keep_logs:
            remove_sockets(tmp)
            print(f"[bench] logs kept in {tmp}", flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)  # ipc sockets, Ray session, ledger, logs
    out = outs[0] if args.rounds == 1 else {"rounds": outs, **rounds_summary(outs)}
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    diff = max(o.get("comparison", {}).get("completion_tokens_diff", 0.0) for o in outs)
    if diff > TOKEN_TOLERANCE:
        print(f"FAIL: completion tokens differ by {diff:.1%} (> {TOKEN_TOLERANCE:.0%}); "
              "the two sides did not do the same work", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as interrupted:
        sys.exit(f"completions_overhead: interrupted ({interrupted or 'SIGINT'}); servers stopped")
