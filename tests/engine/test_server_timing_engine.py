"""The engine's part of Server-Timing (domain/timing.py) on the real vLLM engine: vLLM's own
queue, prefill and decode come back over the engine boundary."""
from __future__ import annotations

from typing import Any

from domain.timing import parse

SKY = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 8, "temperature": 0}


async def test_a_completion_carries_the_engines_stages(real_stack: Any) -> None:
    r = await real_stack.http.post("/v1/completions", headers=real_stack.auth(), json=SKY)
    assert r.status_code == 200, r.text
    stages = parse(r.headers["server-timing"])
    assert {"engine", "vllm", "queue", "prefill", "decode"} <= set(stages)
    assert stages["decode"] > 0 and stages["prefill"] > 0
    # vLLM's parts lie within our wrapper's call, which lies within the engine stage.
    assert stages["queue"] + stages["prefill"] + stages["decode"] <= stages["vllm"] + 0.05
    assert stages["vllm"] <= stages["engine"] + stages["assemble"] + 0.05


async def test_a_stream_carries_queue_and_prefill(real_stack: Any) -> None:
    r = await real_stack.http.post("/v1/completions", headers=real_stack.auth(), json={**SKY, "stream": True})
    assert r.status_code == 200, r.text
    stages = parse(r.headers["server-timing"])
    assert {"engine", "vllm", "queue", "prefill"} <= set(stages) and "decode" not in stages
