"""The API's own CPU a request, in one process: the ledger's drivers against the sessions they replaced.

    python bench/api_cpu.py [--requests 100] [--blocks 6] [--max-tokens 16]
        [--database-url URL] [--json out.json]

The FastAPI app (`api.app.create_app` and `cluster.composition.compose`, as the
ingress builds them) on the embedded default's SQLite ledger (a fresh file;
`--database-url` names another, e.g. PostgreSQL), over an engine that answers
at once with fixed tokens, so what is measured is the API's path and nothing of
Ray, Serve's proxy or vLLM. One client in the same process (httpx's ASGI
transport) sends `POST /v1/completions` one at a time.

Two arms, in alternating blocks of `--requests` (each block with a fresh API
key, under the key's rate limit), in the same run:

- drivers: the platform as it is, whose key check, spend-stop read, Holds and
  settlements run on the pool's own driver (ledger/store/driver_sql.py,
  ledger/store/sqlite_driver.py, ledger/store/pooled_driver.py);
- sessions: the same with those paths turned off (`driver_sql.drives` and
  `sqlite_driver.drives` answer False): the key check and the stop in an ORM
  session, and on SQLite the Holds through SQLAlchemy's Connection, as before
  2026-12-02. On PostgreSQL the Holds stay on asyncpg in both arms.

For each arm: the median over the blocks of the process's CPU per request
(`time.process_time`, the client's share in it), of the wall time per request,
and of each `Server-Timing` stage; then the ratio of the two arms' CPU.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from cluster.ray_env import prepare_ray_environment  # noqa: E402

prepare_ray_environment()

import httpx  # noqa: E402

from api.app import create_app  # noqa: E402
from domain.inference.clients import LocalEngineClient  # noqa: E402
from domain.metrics.counts import Counts  # noqa: E402
from domain.metrics.tally import ProcessTally  # noqa: E402
from domain.settings import Settings  # noqa: E402
from cluster.composition import compose  # noqa: E402
from deployments.catalog import load_catalog  # noqa: E402
from deployments.engine import (  # noqa: E402
    ChoiceDelta, Engine, EngineOutput, EngineState, ForwardRequest, GenerateRequest, PromptRows,
)
from ledger.store import driver_sql
from ledger.store import sqlite_driver  # noqa: E402
from ledger.store.db import make_engine  # noqa: E402
from ledger.accounts.keys import create_api_key, create_user  # noqa: E402
from ledger.store.migrate import upgrade  # noqa: E402

MODEL = "tiny-llama"  # the test catalog's model: its tokenizer counts the prompt
ARMS = ("drivers", "sessions")


class InstantEngine(Engine):
    """Answers every request at once with one token a step: the engine costs next to nothing."""

    async def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return [1] + [ord(c) for c in text]

    async def generate(self, request: GenerateRequest) -> AsyncIterator[EngineOutput]:
        steps = request.sampling.max_tokens
        for step in range(steps):
            last = step == steps - 1
            delta = ChoiceDelta(index=0, text=" a", token_ids=[264], logprobs=None,
                                finish_reason="length" if last else None, stop_reason=None)
            if last or not request.sampling.final_only:
                yield EngineOutput(request.request_id, list(request.prompt_token_ids), [delta], finished=last)

    async def abort(self, request_id: str) -> None:
        return None

    async def forward(self, request: ForwardRequest) -> list[PromptRows]:
        raise NotImplementedError("no forward passes here")

    def state(self) -> EngineState:
        return EngineState(ready=True)

    async def check_health(self) -> None:
        return None

    def shutdown(self) -> None:
        return None


@contextmanager
def arm(name: str) -> Iterator[None]:
    """The sessions arm turns the drivers' paths off for its block."""
    if name == "drivers":
        yield
        return
    kept = driver_sql.drives, sqlite_driver.drives
    driver_sql.drives = sqlite_driver.drives = lambda engine: False
    try:
        yield
    finally:
        driver_sql.drives, sqlite_driver.drives = kept


def stages_of(header: str) -> dict[str, float]:
    stages = {}
    for part in header.split(","):
        name, _, duration = part.strip().partition(";dur=")
        stages[name] = float(duration)
    return stages


async def new_key(sessions: Any) -> str:
    async with sessions() as session:
        user = await create_user(session, f"bench-{uuid.uuid4().hex[:8]}")
        _, raw = await create_api_key(session, user.id, "bench")
        await session.commit()
    return raw


async def run(args: argparse.Namespace) -> dict[str, Any]:
    url = args.database_url or f"sqlite+aiosqlite:///{Path(tempfile.mkdtemp()) / 'acs.db'}"
    await upgrade(url)
    config = Settings(profile="test", smtp_url=None, redis_url=None,
                      mail_outbox=Path(tempfile.mkdtemp()) / "outbox")
    catalog = load_catalog("test")
    app = create_app()
    app.state.services = services = compose(
        config, catalog, {model_id: LocalEngineClient(InstantEngine()) for model_id in catalog.models},
        make_engine(url), counts=Counts(ProcessTally()))
    body = {"model": MODEL, "prompt": "The capital of France is", "max_tokens": args.max_tokens, "temperature": 0}
    figures: dict[str, dict[str, list[float]]] = {name: {"cpu_ms": [], "wall_ms": []} for name in ARMS}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api.test") as http:
        async def block(name: str, count: int) -> None:
            headers = {"Authorization": f"Bearer {await new_key(services.sessions)}"}
            stages: list[dict[str, float]] = []
            with arm(name):
                cpu, wall = time.process_time(), time.perf_counter()
                for _ in range(count):
                    answer = await http.post("/v1/completions", json=body, headers=headers)
                    if answer.status_code != 200:
                        raise SystemExit(f"{name}: {answer.status_code} {answer.text}")
                    stages.append(stages_of(answer.headers["server-timing"]))
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            figures[name]["cpu_ms"].append(1000 * cpu / count)
            figures[name]["wall_ms"].append(1000 * wall / count)
            for stage in stages[0]:
                figures[name].setdefault(stage, []).append(statistics.median(s.get(stage, 0.0) for s in stages))

        for name in ARMS:  # warm both: the first requests compile statements and fill caches
            await block(name, 20)
        for name in ARMS:
            for key in figures[name]:
                figures[name][key].clear()
        for number in range(args.blocks):
            for name in ARMS if number % 2 == 0 else ARMS[::-1]:
                await block(name, args.requests)
    medians = {name: {key: round(statistics.median(values), 3) for key, values in arms.items()}
               for name, arms in figures.items()}
    backend = url.split(":", 1)[0]
    return {"settings": {"requests": args.requests, "blocks": args.blocks, "max_tokens": args.max_tokens,
                         "backend": backend},
            "medians": medians, "blocks": figures,
            "cpu_ratio_drivers_over_sessions": round(medians["drivers"]["cpu_ms"] / medians["sessions"]["cpu_ms"], 3)}


def report_text(report: dict[str, Any]) -> str:
    settings = report["settings"]
    lines = [f"api_cpu: {settings['backend']}, {settings['blocks']} blocks of {settings['requests']} requests "
             f"per arm, max_tokens {settings['max_tokens']}, one at a time, in this process"]
    for name, medians in report["medians"].items():
        stages = ", ".join(f"{stage} {value:.2f}" for stage, value in medians.items()
                           if stage not in ("cpu_ms", "wall_ms"))
        lines.append(f"{name + ':':<10} CPU {medians['cpu_ms']:.2f} ms a request, wall {medians['wall_ms']:.2f} ms; "
                     f"Server-Timing medians (ms): {stages}")
    lines.append(f"ratio (drivers' CPU / sessions' CPU): {report['cpu_ratio_drivers_over_sessions']:.3f}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100, help="requests per block (default 100)")
    parser.add_argument("--blocks", type=int, default=6, help="timed blocks per arm, alternating (default 6)")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--database-url", default=None,
                        help="the ledger's database (default: a fresh SQLite file, the embedded default)")
    parser.add_argument("--json", default=None, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if min(args.requests, args.blocks, args.max_tokens) < 1:
        parser.error("--requests, --blocks and --max-tokens must be 1 or more")
    return args


def main() -> None:
    args = parse_args()
    report = asyncio.run(run(args))
    print(report_text(report), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
