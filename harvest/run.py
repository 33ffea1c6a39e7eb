"""The GPU run of one harvest: a detached, named Ray actor that lives in the Ray
cluster, not in the API process, so the Runner follows the same run after a
restart and never starts a second one.

    handle = start_run(spec)              # harvest-<job_id> in namespace "acs"
    status = ray.get(handle.status.remote())
    ray.get(handle.cancel.remote())

`start` is idempotent: a second call (a Runner after a restart, or a retry)
changes nothing. The run gets the model from its host (harvest/model_host.py),
runs the pipeline (harvest/pipeline.py) in a thread and writes the files
(harvest/shards.py). Past `time_limit_s` it fails with a message that says it
timed out. Its final status stays readable for `keep_status_s` (or until
`close()`), then the actor exits; the Runner's housekeeping ends it sooner, once
the harvest's result is in the ledger (`close_run`, domain/harvests/closing.py).
"""
from __future__ import annotations

import copy
import logging
import tempfile
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, cast

import numpy as np
import ray
import ray.util
from ray.exceptions import RayActorError

from deployments.engine import Engine, EngineRefused
from harvest.model_host import IDLE_S, NAMESPACE, acquire_host, host_name
from harvest.pipeline import (
    PipelineSettings,
    PipelineStopped,
    PipelineTask,
    run_pipeline,
)
from harvest.shards import HarvestWriter, build_manifest, unit_directions
from harvest.storage import HarvestStorage

KEEP_STATUS_S = 30 * 60.0
CANCELLED = "The harvest was cancelled."

log = logging.getLogger(__name__)


def run_name(job_id: uuid.UUID | str) -> str:
    return f"harvest-{uuid.UUID(str(job_id))}"


@dataclass
class RunSpec:
    job_id: str
    model: dict[str, Any]  # the catalog's ModelSpec, model_dump(by_alias=True)
    prompts: list[str]
    layers: list[int]  # ascending, unique
    shard_size: int
    batch_size: int | None
    add_special_tokens: bool
    directions: np.ndarray | None  # float32 [k, hidden]; scaled to length 1 here
    storage_root: str
    time_limit_s: float
    # Beyond the API's needs: tests build a fake engine, and shorten the waits.
    engine_factory: Callable[[], Engine] | None = None
    host_idle_s: float = IDLE_S
    keep_status_s: float = KEEP_STATUS_S
    settings: PipelineSettings = field(default_factory=PipelineSettings)


@dataclass
class RunStatus:
    state: str  # starting | running | done | failed
    prompts_done: int = 0
    n_prompts: int = 0
    gpu_started_at: float | None = None  # time.time() when the forward passes started
    result: dict[str, Any] | None = None  # HarvestResult's fields but the links, and tokens_read
    error: str | None = None
    ended_at: float | None = None  # time.time() when it became done or failed


def duration_words(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        minutes = int(seconds // 60)
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{seconds:g} second{'s' if seconds != 1 else ''}"


def timed_out_message(limit_s: float) -> str:
    return f"The harvest timed out: its GPU run did not end within its time limit of {duration_words(limit_s)}."


def _causes(error: BaseException | None) -> list[BaseException]:
    """The error and what it wraps: Ray's RayTaskError carries the remote one in
    `cause`, and Ray Data chains the stage's own with `from`."""
    seen: list[BaseException] = []
    while error is not None and error not in seen:
        seen.append(error)
        error = getattr(error, "cause", None) or error.__cause__ or error.__context__
    return seen


def failure_message(error: BaseException) -> str:
    causes = _causes(error)
    for cause in causes:
        if isinstance(cause, EngineRefused):
            return cause.message
    root = causes[-1]
    return f"The harvest failed in Inference: {type(root).__name__}: {_last_line(str(root))}"


def _last_line(text: str) -> str:
    """The line of an error's text that says what went wrong, not where (Ray adds tracebacks)."""
    noise = ("For further information", "File ", "Traceback", "^", "~")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith(noise)]
    return lines[-1][:500] if lines else ""


class Stop:
    """Why the run should end early: a cancel, or the time limit."""

    def __init__(self, deadline: float) -> None:
        self.deadline, self.event, self.reason = deadline, threading.Event(), ""

    def set(self, reason: str) -> None:
        if not self.event.is_set():
            self.reason = reason
            self.event.set()

    def __call__(self) -> bool:
        if time.monotonic() >= self.deadline:
            self.set("timeout")
        return self.event.is_set()


def _timer(seconds: float, function: Callable[[], None]) -> None:
    timer = threading.Timer(seconds, function)
    timer.daemon = True
    timer.start()


class HarvestRun:
    """One harvest's GPU run (a detached, threaded actor; see `start_run`)."""

    def __init__(self) -> None:
        self.spec: RunSpec | None = None
        self.current = RunStatus("starting")
        self.stop: Stop | None = None
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.ended_at: float | None = None

    def start(self, spec: RunSpec) -> None:
        with self.lock:
            if self.spec is not None:
                return  # idempotent: the run that is there goes on
            self.spec = spec
            self.current = RunStatus("starting", n_prompts=len(spec.prompts))
            self.stop = Stop(time.monotonic() + spec.time_limit_s)
        self.thread = threading.Thread(target=self._run, name=run_name(spec.job_id), daemon=True)
        self.thread.start()
        _timer(spec.time_limit_s, self._deadline)

    def status(self) -> RunStatus:
        return copy.deepcopy(self.current)

    def _started(self) -> tuple[RunSpec, Stop]:
        """The spec and the stop, which `start` sets before the thread and the timers that read them."""
        spec, stop = self.spec, self.stop
        if spec is None or stop is None:
            raise RuntimeError("the harvest run has not started")
        return spec, stop

    def cancel(self) -> None:
        """Stop the run (also while the model loads); the actor then exits."""
        if self.stop is not None:
            self.stop.set("cancel")
        if self.current.state not in ("done", "failed"):
            self._end(RunStatus("failed", self.current.prompts_done, self.current.n_prompts,
                                self.current.gpu_started_at, None, CANCELLED))
        # Let the thread stop the pipeline (its actor pools die with this process anyway).
        _timer(5.0, self.close)

    def close(self) -> None:
        """End this actor now (the Runner read the final status)."""
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    # -- the run, in its thread ------------------------------------------------------------
    def _run(self) -> None:
        spec, stop = self._started()
        storage = HarvestStorage(spec.storage_root)
        try:
            self._update(state="running")
            result = self._harvest(spec, storage, stop)
            done = RunStatus("done", len(spec.prompts), len(spec.prompts), self.current.gpu_started_at, result)
            if not self._end(done):
                self._remove(storage)  # a cancel or the time limit ended it while the last files went out
        except PipelineStopped:
            self._fail(storage, CANCELLED if stop.reason == "cancel" else timed_out_message(spec.time_limit_s))
        except BaseException as error:  # noqa: BLE001 - the status carries every failure
            log.error("harvest %s failed: %s", spec.job_id, traceback.format_exc())
            if stop.event.is_set():
                message = CANCELLED if stop.reason == "cancel" else timed_out_message(spec.time_limit_s)
            else:
                message = failure_message(error)
            self._fail(storage, message)

    def _harvest(self, spec: RunSpec, storage: HarvestStorage, stop: Stop) -> dict[str, Any]:
        from deployments.catalog import ModelSpec

        model = ModelSpec.model_validate(spec.model)
        _, info, load_s = acquire_host(spec.model, spec.engine_factory, spec.host_idle_s)
        if stop():
            raise PipelineStopped()
        directions, projection = (None, None) if spec.directions is None else unit_directions(spec.directions)
        width = model.hidden_size if directions is None else directions.shape[0]
        task = PipelineTask(
            job_id=spec.job_id, prompts=spec.prompts, layers=list(spec.layers),
            add_special_tokens=spec.add_special_tokens,
            max_prompt_tokens=model.max_model_len - 1, width=width, host_name=host_name(model.id),
            host_namespace=NAMESPACE, directions=directions, settings=spec.settings,
        )
        with tempfile.TemporaryDirectory(prefix="acs-harvest-") as spool:
            writer = HarvestWriter(storage, spec.job_id, n_prompts=len(spec.prompts), shard_size=spec.shard_size,
                                   layer_indices=spec.layers, width=width, spool_dir=spool)

            def on_prompt(prompt: Any) -> None:
                writer.add(prompt)
                self._update(prompts_done=writer.prompts_done)

            times = run_pipeline(task, on_prompt, stop, lambda at: self._update(gpu_started_at=at))
            manifest = build_manifest(
                run_id=spec.job_id, model_id=model.served_model_name, model_identity=info.model_identity,
                runtime={**info.runtime, "pipeline": vars(spec.settings)}, projecting=directions is not None,
                add_special_tokens=spec.add_special_tokens, layer_indices=spec.layers, prompts=spec.prompts,
                batch_size=spec.batch_size, projection=projection,
            )
            writer.finish(manifest)
        totals = writer.totals
        return {
            "n_shards": totals.n_shards, "layer_indices": list(spec.layers),
            "contents": "projections" if directions is not None else "activations",
            "tokens": totals.tokens, "bytes_written": totals.bytes_written,
            "timings": {"load_s": round(load_s, 3), "forward_s": round(times.forward_s, 3),
                        "save_s": round(totals.save.seconds, 3), "upload_s": round(totals.upload.seconds, 3)},
            "tokens_read": totals.tokens,
        }

    def _fail(self, storage: HarvestStorage, message: str) -> None:
        self._remove(storage)  # a failed harvest leaves no partial files (the spool went with its folder)
        current = self.current
        self._end(RunStatus("failed", current.prompts_done, current.n_prompts, current.gpu_started_at, None, message))

    def _remove(self, storage: HarvestStorage) -> None:
        job_id = self._started()[0].job_id
        try:
            storage.delete(job_id)
        except Exception:  # noqa: BLE001
            log.exception("harvest %s: could not remove its files", job_id)

    # -- status, from either thread --------------------------------------------------------
    def _update(self, **changes: Any) -> None:
        with self.lock:
            if self.current.state in ("done", "failed"):
                return
            status = copy.copy(self.current)
            for name, value in changes.items():
                setattr(status, name, value)
            self.current = status

    def _end(self, status: RunStatus) -> bool:
        """The final status; False when the run had ended already (the first end wins:
        a cancel, the time limit, or the run's own)."""
        with self.lock:
            if self.current.state in ("done", "failed"):
                return False
            status.ended_at = self.ended_at = time.time()
            self.current = status
        _timer(self._started()[0].keep_status_s, self.close)
        return True

    def _deadline(self) -> None:
        """The thread may be stuck in a load or a call: the status fails on time anyway."""
        spec, stop = self._started()
        stop.set("timeout")
        current = self.current
        self._end(RunStatus("failed", current.prompts_done, current.n_prompts, current.gpu_started_at, None,
                            timed_out_message(spec.time_limit_s)))


RemoteHarvestRun = ray.remote(HarvestRun)


def start_run(spec: RunSpec) -> Any:
    """The run of `spec.job_id`, made if it is not there, and started (idempotent)."""
    handle = RemoteHarvestRun.options(
        name=run_name(spec.job_id), namespace=NAMESPACE, get_if_exists=True, lifetime="detached",
        num_cpus=0, max_restarts=0, max_concurrency=16,
    ).remote()
    ray.get(handle.start.remote(spec))
    return handle


def find_run(job_id: uuid.UUID | str) -> Any | None:
    """The run of a harvest, if it is still in the cluster (a Runner after a restart)."""
    try:
        return ray.get_actor(run_name(job_id), namespace=NAMESPACE)
    except ValueError:
        return None


def live_runs() -> list[str]:
    """The names of the harvest runs alive in the cluster: one read of the GCS's named actors
    (a dead actor's name is gone from it). None outside a Ray process, where no run can be."""
    if not ray.is_initialized():
        return []
    # With all_namespaces, each is {"name", "namespace"} (its annotation says str).
    actors = cast(list[dict[str, str]], ray.util.list_named_actors(all_namespaces=True))
    return [actor["name"] for actor in actors if actor["namespace"] == NAMESPACE and _is_run(actor["name"])]


def _is_run(name: str) -> bool:
    """Not the namespace's other actors (the model hosts are `harvest-model-<id>`)."""
    try:
        return run_name(name.removeprefix("harvest-")) == name
    except ValueError:
        return False


def close_run(job_id: uuid.UUID | str) -> None:
    """End the run of a harvest whose work ended. Through `cancel`: an ended run only exits (in
    seconds), and one that still runs (a row failed or cancelled while the Runner was away) stops
    as a cancel stops it, its partial files removed, before it exits. A run that cannot answer
    (one whose start never came) is killed."""
    actor = find_run(job_id)
    if actor is None:
        return
    try:
        ray.get(actor.cancel.remote(), timeout=60)
    except RayActorError:
        return  # it exited meanwhile
    except Exception:  # noqa: BLE001 - it must go all the same
        log.exception("harvest %s: its run did not take the cancel; killed", job_id)
        ray.kill(actor, no_restart=True)
