"""The engine's own start, seen from the replica that builds it.

vLLM loads the weights and then profiles memory and warms its kernels up in
its worker, which runs in the EngineCore's child process (and, with tensor
parallelism, in one process per GPU), while the replica waits in
`AsyncLLM.from_engine_args`. The worker's first rank writes each stage to a
file named by an environment variable that its processes inherit; the
replica watches that file and forwards each new stage (to the boot board).
"""
from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator

from deployments.boot import WEIGHTS_LOADED, WEIGHTS_LOADING
from deployments.vllm_runtime import REPO_ROOT

STAGE_FILE_ENV = "ACS_ENGINE_STAGE_FILE"
POLL_S = 0.1
STAGE_FOLDER = REPO_ROOT / ".vllm_cache" / "stages"


def write_stage(stage: str) -> None:
    """In a worker: say which stage the engine's start has reached (nothing without a watcher)."""
    path = os.environ.get(STAGE_FILE_ENV)
    if not path:
        return
    partial = f"{path}.{os.getpid()}"
    Path(partial).write_text(json.dumps({"stage": stage, "at": time.time()}))
    os.replace(partial, path)  # the watcher never reads half a file


def read_stage(path: Path) -> str | None:
    try:
        return json.loads(path.read_text())["stage"]
    except (FileNotFoundError, ValueError, KeyError):
        return None


def report_weight_loading() -> None:
    """Wrap the worker's `load_model`: its start and its end are the stages' edges.

    Every worker runs through vLLM's WorkerWrapperBase, which hands `load_model`
    to the platform's worker; after it, vLLM profiles memory and warms up.
    """
    from vllm.v1.worker.worker_base import WorkerWrapperBase

    if getattr(WorkerWrapperBase, "_acs_reports_stages", False):
        return

    def load_model(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - vLLM's own signature
        first = self.rpc_rank == 0  # one report for all the GPUs of a tensor-parallel engine
        if first:
            write_stage(WEIGHTS_LOADING)
        result = self.worker.load_model(*args, **kwargs)
        if first:
            write_stage(WEIGHTS_LOADED)
        return result

    # A patch of vLLM's class, which declares neither name (it forwards load_model by __getattr__).
    setattr(WorkerWrapperBase, "load_model", load_model)
    setattr(WorkerWrapperBase, "_acs_reports_stages", True)


class StageWatcher:
    """Forwards the stages that the engine's workers write, while the engine starts."""

    def __init__(self, on_stage: Callable[[str], None], folder: Path = STAGE_FOLDER) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"stage-{uuid.uuid4().hex}.json"
        self.on_stage = on_stage
        self.seen: str | None = None
        self._stop = threading.Event()

    def poll(self) -> None:
        stage = read_stage(self.path)
        if stage is not None and stage != self.seen:
            self.seen = stage
            self.on_stage(stage)

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            self.poll()

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        previous = os.environ.get(STAGE_FILE_ENV)
        os.environ[STAGE_FILE_ENV] = str(self.path)
        thread = threading.Thread(target=self._run, name="engine-stages", daemon=True)
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join()
            self.poll()  # the last stage, written just before the engine answered
            if previous is None:
                os.environ.pop(STAGE_FILE_ENV, None)
            else:
                os.environ[STAGE_FILE_ENV] = previous
            self.path.unlink(missing_ok=True)
