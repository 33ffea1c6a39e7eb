"""The chaos soak's checks after the traffic (bench/chaos.py): every piece of work ends, and every
`done` harvest's files equal a rerun of its prompts.

The rerun's shards are compared tensor by tensor: exactly (torch.equal) first, then within
float32's tolerance of a different batch (atol 1e-4, rtol 1e-3). A harvest's batches are the
engine's to size, and a prompt batched with others of other lengths runs through kernels of
another shape, whose sums may round differently in the last bits; the same prompts alone in one
batch give the same bits. Each is counted apart, so the figures say which held.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from bench.chaos_traffic import Account, Traffic

GROWING = ("queued", "running", "pending")
HARVESTS_RERUN = 12  # at most: each rerun takes the harvest host a few seconds


async def _status(traffic: Traffic, ids: dict[str, Any]) -> str | None:
    """The work's status now (a Loom: `running` while any Node grows), None when unreadable."""
    key = {"Authorization": f"Bearer {ids.get('key', '')}"}
    try:
        if "job" in ids:
            answer = await traffic.http.get(f"/v1/completion-jobs/{ids['job']}", headers=key)
        elif "harvest" in ids:
            answer = await traffic.http.get(f"/v1/harvest/{ids['harvest']}", params={"wait": 2}, headers=key)
        elif "loom" in ids:
            answer = await traffic.http.get(f"/v1/looms/{ids['loom']}", headers=key)
        else:
            answer = await traffic.app.get(f"/account/runs/{ids['run']}")
    except httpx.HTTPError:
        return None
    if answer.status_code != 200:
        return None
    body = answer.json()
    if "loom" in ids:
        statuses = [node.get("status", "completed") for node in body["nodes"]]
        return "running" if any(s in GROWING for s in statuses) else "ended"
    return body["status"]


async def wait_for_work(traffic: Traffic, within_s: float) -> dict[str, Any]:
    """Wait until every Job, harvest, Loom Branch and Run that the soak made has ended; how many
    of each kind ended with which status, and how many had not ended within `within_s`."""
    pending = {i: r for i, r in enumerate(traffic.records) if r.ids}
    ended: dict[str, dict[str, int]] = {}
    deadline = time.monotonic() + within_s
    while pending and time.monotonic() < deadline:
        for i, record in list(pending.items()):
            status = await _status(traffic, record.ids)
            if status is not None and status not in GROWING:
                kind = next(k for k in ("job", "harvest", "loom", "run") if k in record.ids)
                ended.setdefault(kind, {})[status] = ended.setdefault(kind, {}).get(status, 0) + 1
                del pending[i]
        if pending:
            await asyncio.sleep(2)
    late = [{"kind": r.kind, "ids": {k: v for k, v in r.ids.items() if k != "key"}} for r in pending.values()]
    return {"ended": ended, "not_ended": len(late), "not_ended_ids": late[:20]}


def _absolute(traffic: Traffic, url: str) -> str:
    return url if url.startswith("http") else traffic.base_url + url


async def _shards(traffic: Traffic, result: dict[str, Any]) -> dict[str, Any]:
    from safetensors.torch import load

    tensors: dict[str, Any] = {}
    for url in result["shard_urls"]:
        answer = await traffic.http.get(_absolute(traffic, url))
        answer.raise_for_status()
        tensors.update(load(answer.content))
    return tensors


async def _done(traffic: Traffic, job_id: str, key: str, within_s: float) -> dict[str, Any] | None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        answer = await traffic.http.get(f"/v1/harvest/{job_id}", params={"wait": 5},
                                        headers={"Authorization": f"Bearer {key}"})
        if answer.status_code == 200 and answer.json()["status"] not in GROWING:
            return answer.json()
        await asyncio.sleep(0.5)
    return None


def same(first: dict[str, Any], second: dict[str, Any]) -> str:
    """`exact`, `close` (every tensor within float tolerance) or `differ`."""
    import torch

    if set(first) != set(second):
        return "differ"
    if all(torch.equal(first[name], second[name]) for name in first):
        return "exact"
    if all(first[name].shape == second[name].shape and
           torch.allclose(first[name].float(), second[name].float(), atol=1e-4, rtol=1e-3) for name in first):
        return "close"
    return "differ"


async def compare_harvests(traffic: Traffic, accounts: list[Account], within_s: float) -> dict[str, Any]:
    """Rerun the prompts of each `done` harvest (at most HARVESTS_RERUN of them) with a key whose
    Budget is large, and compare the files."""
    rerun_key = next(a.key for a in accounts if not a.near_end)
    counts = {"done": 0, "exact": 0, "close": 0, "differ": 0, "not_compared": 0, "differing": []}
    for harvest in traffic.harvests:
        job = await _done(traffic, harvest["id"], harvest["key"], 30)
        if job is None or job["status"] != "done":
            continue
        counts["done"] += 1
        if counts["done"] > HARVESTS_RERUN:
            counts["not_compared"] += 1
            continue
        made = await traffic.http.post("/v1/harvest", json=harvest["body"],
                                       headers={"Authorization": f"Bearer {rerun_key}"})
        again = await _done(traffic, made.json()["job_id"], rerun_key, within_s) if made.status_code == 202 else None
        if again is None or again["status"] != "done":
            counts["not_compared"] += 1
            continue
        verdict = same(await _shards(traffic, job["result"]), await _shards(traffic, again["result"]))
        counts[verdict] += 1
        if verdict == "differ":
            counts["differing"].append(harvest["id"])
    return counts
