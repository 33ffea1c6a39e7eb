"""The model catalog: one YAML per served model, and profiles that pick some.

`configs/models/<id>.yaml` describes a model (weights, GPU shape, engine
arguments, autoscaling). `configs/profiles/<name>.yaml` lists the models one
deployment serves, its default, and aliases (the embedded default answers
`llama-8b` with SmolLM2, so the spec's examples run unchanged).

Weights and tokenizer are either a folder under the models dir
(`ACS_MODELS_DIR`, default `<repo>/models`, built by `cluster.build_models`)
or a Hugging Face repo id (`owner/name`) for GPU clusters.
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIGS_DIR = REPO_ROOT / "configs"

# Limits that GET /v1/models lists in `capabilities`, the same for each model
# unless a model's YAML overrides them (spec/docs.md, "Keys of capabilities").
MAX_LOGPROBS = 100
MAX_OUTPUT_WORK_TOKENS = 32_000
MAX_INFLIGHT_PER_KEY = 16
MAX_QUEUED_PER_KEY = 64
RATE_LIMIT_PER_MINUTE = 600
FULL_VOCAB_MAX_PROMPT_TOKENS = 256
MAX_STEERING_VECTORS = 8
# An all-layer capture holds n_layers * hidden_size numbers per token; this
# budget gives llama-8b the spec's 256 tokens (2**25 / (32 * 4096)).
ACTIVATION_CAPTURE_BUDGET = 2**25


class CatalogError(ValueError):
    """A catalog or profile file that does not describe a usable catalog."""


DEFAULT_MODELS_DIR = REPO_ROOT / "models"


def models_dir(configured: str | os.PathLike[str] | None = None) -> Path:
    """Folder of the locally built model folders: the setting `ACS_MODELS_DIR`
    (the caller reads it), else `<repo>/models`."""
    return Path(configured).expanduser().resolve() if configured else DEFAULT_MODELS_DIR


def is_local_ref(ref: str, root: Path = DEFAULT_MODELS_DIR) -> bool:
    """A weights/tokenizer reference names a local folder unless it is `owner/name`."""
    if Path(ref).is_absolute() or ref.startswith("."):
        return True
    return "/" not in ref or (root / ref).is_dir()


def resolve_ref(ref: str, root: Path = DEFAULT_MODELS_DIR) -> str:
    """A local folder as an absolute path; a Hugging Face repo id unchanged."""
    if not is_local_ref(ref, root):
        return ref
    path = Path(ref).expanduser()
    return str(path if path.is_absolute() else (root / path).resolve())


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EngineSpec(BaseModel):
    """vLLM engine arguments; keys beyond these pass through (max_num_seqs, ...)."""

    model_config = ConfigDict(extra="allow")

    dtype: str = "auto"
    max_model_len: int = Field(gt=0)
    tensor_parallel_size: int = Field(default=1, ge=1)

    def engine_args(self) -> dict[str, Any]:
        return self.model_dump()


class AutoscalingSpec(_Strict):
    min_replicas: int = Field(default=0, ge=0)
    max_replicas: int = Field(default=1, ge=1)
    initial_replicas: int | None = Field(default=None, ge=0)
    target_ongoing_requests: float = Field(default=8, gt=0)
    downscale_delay_s: float = Field(default=600, ge=0)
    # The last replica's own delay (Serve's field): the model's idle window after its last request.
    downscale_to_zero_delay_s: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> AutoscalingSpec:
        initial = self.min_replicas if self.initial_replicas is None else self.initial_replicas
        if not self.min_replicas <= initial <= self.max_replicas:
            raise ValueError("need min_replicas <= initial_replicas <= max_replicas")
        return self


class RayActorOptions(_Strict):
    num_cpus: float = Field(default=1, ge=0)
    num_gpus: float = Field(default=0, ge=0)
    # Ray's custom resources of a node (`ray start --resources`): a node type that alone offers
    # one is where the replica goes, as `api` keeps the ingress on the head (cluster/ray-*.yaml).
    resources: dict[str, float] = {}


class CapabilityOverrides(_Strict):
    """Facts of the model (read from config.json when left out) and limit overrides."""

    n_layers: int | None = Field(default=None, gt=0)
    hidden_size: int | None = Field(default=None, gt=0)
    max_logprobs: int = MAX_LOGPROBS
    max_output_work_tokens: int = MAX_OUTPUT_WORK_TOKENS
    max_inflight_per_key: int = MAX_INFLIGHT_PER_KEY
    max_queued_per_key: int = MAX_QUEUED_PER_KEY
    rate_limit_per_minute: int = RATE_LIMIT_PER_MINUTE
    full_vocab_max_prompt_tokens: int = FULL_VOCAB_MAX_PROMPT_TOKENS
    max_steering_vectors: int = MAX_STEERING_VECTORS


class ModelSpec(_Strict):
    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, ignored_types=(cached_property,)
    )

    id: str
    served_model_name: str
    weights: str
    tokenizer: str | None = None
    gpu_shape: str
    engine: EngineSpec
    autoscaling: AutoscalingSpec = AutoscalingSpec()
    ray_actor_options: RayActorOptions = RayActorOptions()
    # Where the harvest model host goes (harvest/model_host.py); None: where the replicas go.
    harvest_actor_options: RayActorOptions | None = None
    default: bool = False
    # Harvests: whether the model takes them, its class for the caps (the
    # spec's "small models", llama-8b, and "large models", 405B and Trinity),
    # and the time limit of one GPU run.
    harvest: bool = True
    harvest_class: Literal["small", "large"] = "small"
    harvest_time_limit_s: float = Field(default=60 * 60.0, gt=0)
    # The engine of its harvests (harvest/model_host.py): `torch`, PyTorch's forward packed by length on
    # one device (bench/harvest.py, 2026-12-05 on the 2-core CPU: 1.23 x the forward phase of vLLM's
    # request per prompt; a GPU not measured yet); `vllm` for a model that needs several GPUs.
    harvest_engine: Literal["torch", "vllm"] = "torch"
    # What one GPU of `gpu_shape` costs an hour (0 on a CPU): the GPU spend's
    # estimate and what a warm window costs (spec: "Keep a model Warm").
    gpu_hour_usd: float = Field(default=0.0, ge=0)
    # YAML key `capabilities`: facts and limit overrides. The API's dict is
    # the method capabilities(), so the field takes another Python name.
    overrides: CapabilityOverrides = Field(
        default_factory=CapabilityOverrides, alias="capabilities"
    )

    @model_validator(mode="after")
    def _facts_known(self) -> ModelSpec:
        caps = self.overrides
        if not is_local_ref(self.weights) and (caps.n_layers is None or caps.hidden_size is None):
            raise ValueError(
                f"model {self.id!r}: weights {self.weights!r} is a hub repo, so "
                "capabilities.n_layers and capabilities.hidden_size must be given"
            )
        return self

    @model_validator(mode="after")
    def _harvest_engine_fits(self) -> ModelSpec:
        if self.harvest_engine == "torch" and self.engine.tensor_parallel_size > 1:
            raise ValueError(
                f"model {self.id!r}: harvest_engine torch runs on one device, and the model needs "
                f"tensor_parallel_size {self.engine.tensor_parallel_size}: set harvest_engine: vllm"
            )
        return self

    @property
    def is_local(self) -> bool:
        return is_local_ref(self.weights)

    @property
    def on_cpu(self) -> bool:
        """Whether the engine runs on the CPU: vLLM's CPU settings (deployments/vllm_runtime.py)."""
        return self.gpu_shape == "cpu"

    @property
    def harvest_placement(self) -> RayActorOptions:
        """The harvest model host's resources: its own where given, else a replica's."""
        return self.harvest_actor_options or self.ray_actor_options

    @property
    def gpus_per_replica(self) -> float:
        return self.ray_actor_options.num_gpus

    @property
    def replica_hour_usd(self) -> float:
        """What one replica costs an hour: a Warm hour of the model."""
        return self.gpus_per_replica * self.gpu_hour_usd

    def weights_path(self) -> str:
        """What to pass to vLLM as `model`: an absolute folder or a repo id."""
        return resolve_ref(self.weights)

    def tokenizer_path(self) -> str:
        return resolve_ref(self.tokenizer or self.weights)

    def vllm_args(self) -> dict[str, Any]:
        """The engine's arguments; vLLM names the model as the API does (in its own refusals)."""
        return {**self.engine.engine_args(), "served_model_name": self.served_model_name}

    @cached_property
    def hf_config(self) -> dict[str, Any]:
        """The local folder's config.json ({} for hub weights)."""
        if not self.is_local:
            return {}
        path = Path(self.weights_path()) / "config.json"
        try:
            return json.loads(path.read_text())
        except FileNotFoundError as exc:
            raise CatalogError(
                f"model {self.id!r}: {path} is missing; run `python -m cluster.build_models`"
            ) from exc

    @property
    def n_layers(self) -> int:
        explicit = self.overrides.n_layers
        return explicit if explicit is not None else int(self.hf_config["num_hidden_layers"])

    @property
    def hidden_size(self) -> int:
        explicit = self.overrides.hidden_size
        return explicit if explicit is not None else int(self.hf_config["hidden_size"])

    @property
    def max_model_len(self) -> int:
        return self.engine.max_model_len

    @property
    def max_activation_prompt_tokens(self) -> int:
        return ACTIVATION_CAPTURE_BUDGET // (self.n_layers * self.hidden_size)

    def capabilities(self) -> dict[str, Any]:
        """The `capabilities` object of GET /v1/models, keys in the spec's order."""
        caps = self.overrides
        return {
            "max_model_len": self.max_model_len,
            "max_logprobs": caps.max_logprobs,
            "max_output_work_tokens": caps.max_output_work_tokens,
            "max_inflight_per_key": caps.max_inflight_per_key,
            "max_queued_per_key": caps.max_queued_per_key,
            "rate_limit_per_minute": caps.rate_limit_per_minute,
            "logprobs": True,
            "prompt_logprobs": True,
            "prompt_logprobs_full_vocab": True,
            "full_vocab_max_prompt_tokens": caps.full_vocab_max_prompt_tokens,
            "activations": True,
            "max_steering_vectors": caps.max_steering_vectors,
            "max_activation_prompt_tokens": self.max_activation_prompt_tokens,
            "n_layers": self.n_layers,
            "hidden_size": self.hidden_size,
            "chat_template": None,
        }


class Profile(_Strict):
    models: list[str] = Field(min_length=1)
    default: str | None = None
    aliases: dict[str, str] = {}
    # Fields of a model's YAML that this profile sets otherwise, deep-merged over
    # configs/models/<id>.yaml: one model file serves every profile (the rehearsal's places and
    # scaling, the test suite's fixed replica), each profile saying only where it differs.
    overrides: dict[str, dict[str, Any]] = {}

    @model_validator(mode="after")
    def _overrides_name_its_models(self) -> Profile:
        unknown = sorted(set(self.overrides) - set(self.models))
        if unknown:
            raise ValueError(f"overrides name {', '.join(map(repr, unknown))}, which the profile does not serve")
        return self
    # The ingress replica hosts the models' engines and the background Runner itself, instead
    # of a deployment each: one machine's platform then runs one process beside the engine's
    # core, as vLLM's own server does (bench/NOTES.md, "One process").
    colocate: bool = False


class Catalog(BaseModel):
    """The models one deployment serves, in the profile's order."""

    models: dict[str, ModelSpec]
    default_id: str
    aliases: dict[str, str] = {}
    colocate: bool = False  # the profile's: see Profile

    @model_validator(mode="after")
    def _consistent(self) -> Catalog:
        if self.default_id not in self.models:
            raise ValueError(f"default {self.default_id!r} is not among the profile's models")
        for alias, target in self.aliases.items():
            if alias in self.models:
                raise ValueError(f"alias {alias!r} shadows a served model id")
            if target not in self.models:
                raise ValueError(f"alias {alias!r} points to {target!r}, which is not served")
        served = [m.served_model_name for m in self.models.values()]
        if len(set(served)) != len(served):
            raise ValueError("two models share a served_model_name")
        if self.colocate:
            scaled = [m.id for m in self.models.values()
                      if (m.autoscaling.min_replicas, m.autoscaling.max_replicas) != (1, 1)]
            if scaled:
                # A colocated engine lives and scales with the ingress's one replica.
                raise ValueError(f"colocate needs one fixed replica of each model; {', '.join(scaled)} scales")
        return self

    @property
    def default(self) -> ModelSpec:
        return self.models[self.default_id]

    def resolve(self, name: str | None) -> ModelSpec | None:
        """The model for a request's `model`: an id, an alias, or a served_model_name."""
        if name is None:
            return self.default
        if name in self.models:
            return self.models[name]
        if name in self.aliases:
            return self.models[self.aliases[name]]
        for spec in self.models.values():
            if spec.served_model_name == name:
                return spec
        return None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError as exc:
        raise CatalogError(f"{path} does not exist") from exc
    if not isinstance(data, dict):
        raise CatalogError(f"{path} does not hold a mapping")
    return data


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`base` with `override`'s keys set over it; where both hold a mapping, merged the same way."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_model_spec(model_id: str, configs_dir: Path = CONFIGS_DIR,
                    override: dict[str, Any] | None = None) -> ModelSpec:
    """The model of configs/models/<id>.yaml, with a profile's `override` merged over it."""
    path = configs_dir / "models" / f"{model_id}.yaml"
    data = _read_yaml(path)
    if override:
        if "id" in override:
            raise CatalogError(f"the override of {model_id!r} sets `id`: a model keeps the id of its file")
        data = deep_merge(data, override)
    try:
        spec = ModelSpec.model_validate(data)
    except ValueError as exc:
        where = f"{path} with the profile's overrides" if override else str(path)
        raise CatalogError(f"{where}: {exc}") from exc
    if spec.id != model_id:
        raise CatalogError(f"{path} has id {spec.id!r}, not {model_id!r}")
    return spec


def _profile_path(profile: str | os.PathLike[str], configs_dir: Path) -> Path:
    path = Path(profile)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        return path
    return configs_dir / "profiles" / f"{profile}.yaml"


def _pick_default(profile: Profile, specs: dict[str, ModelSpec]) -> str:
    if profile.default is not None:
        return profile.default
    flagged = [model_id for model_id, spec in specs.items() if spec.default]
    if len(specs) == 1:
        return next(iter(specs))
    if len(flagged) != 1:
        raise CatalogError(f"profile needs `default:`; models flagged default: {flagged}")
    return flagged[0]


def _resolved_refs(spec: ModelSpec, root: Path) -> dict[str, str]:
    refs = {"weights": resolve_ref(spec.weights, root)}
    if spec.tokenizer:
        refs["tokenizer"] = resolve_ref(spec.tokenizer, root)
    return refs


def load_catalog(
    profile: str | os.PathLike[str] = "embedded", configs_dir: Path = CONFIGS_DIR,
    models_root: str | os.PathLike[str] | None = None,
) -> Catalog:
    """Load a profile by name (`configs/profiles/<name>.yaml`) or by path.

    Local weights and tokenizers resolve against `models_root` (see
    `models_dir`) here, once, so a replica that gets a spec never reads a setting.
    """
    path = _profile_path(profile, configs_dir)
    try:
        prof = Profile.model_validate(_read_yaml(path))
    except ValueError as exc:
        raise CatalogError(f"{path}: {exc}") from exc
    specs = {model_id: load_model_spec(model_id, configs_dir, prof.overrides.get(model_id))
             for model_id in prof.models}
    default_id = _pick_default(prof, specs)
    # The profile decides which model is the default, whatever the YAMLs say.
    root = models_dir(models_root)
    specs = {
        model_id: spec.model_copy(update={"default": model_id == default_id, **_resolved_refs(spec, root)})
        for model_id, spec in specs.items()
    }
    try:
        return Catalog(models=specs, default_id=default_id, aliases=prof.aliases, colocate=prof.colocate)
    except ValueError as exc:
        raise CatalogError(f"{path}: {exc}") from exc
