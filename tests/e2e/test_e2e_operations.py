"""The platform's operations in the Runner's replica of the Serve application: the
spend sampler counts the model's replicas from Serve's own details, through the
handles that the replica was given, and records them in the ledger."""
from __future__ import annotations

import time
from typing import Any, Iterator

import pytest
from sqlmodel import select

from ledger.tokens.tables import SpendSample
from tests.serve_fixtures import ServeInstance, run_async

# The sampler counts at the Runner's start, then each ACS_SPEND_SAMPLE_S (60 s).
SAMPLE_WAIT_S = 150.0


@pytest.fixture(scope="module")
def stack(serve_instance: ServeInstance) -> Iterator[str]:
    with serve_instance.application("test", "operations", "/operations") as base:
        yield base


def samples(serve_instance: ServeInstance) -> list[Any]:
    async def read() -> list[Any]:
        from ledger.store.db import make_engine, session_factory

        engine = make_engine(serve_instance.database_url)
        try:
            async with session_factory(engine)() as session:
                return list((await session.exec(select(SpendSample).order_by(SpendSample.at))).all())
        finally:
            await engine.dispose()
    return run_async(read())


def test_the_runner_replica_counts_the_models_replicas_into_the_ledger(serve_instance: ServeInstance,
                                                                      stack: str) -> None:
    deadline = time.monotonic() + SAMPLE_WAIT_S
    while True:
        counted = [sample for sample in samples(serve_instance) if sample.model_id == "tiny-llama"]
        if any(sample.replicas == 1 for sample in counted):
            break
        assert time.monotonic() < deadline, counted
        time.sleep(1.0)
    # The tiny model runs on a CPU: its replica is counted, and its GPUs cost nothing.
    assert all(sample.gpus == 0 and sample.usd == 0 for sample in counted)
