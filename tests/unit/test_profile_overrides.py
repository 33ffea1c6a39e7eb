"""A profile's `overrides`: fields of a model's YAML set otherwise for that profile alone, merged
over configs/models/<id>.yaml; and where the harvest model host goes."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from deployments.catalog import CONFIGS_DIR, CatalogError, deep_merge, load_catalog
from harvest.model_host import host_options


@pytest.fixture
def configs(tmp_path: Path) -> Path:
    """A configs folder with the real tiny-llama and smollm2-135m model files."""
    (tmp_path / "models").mkdir()
    (tmp_path / "profiles").mkdir()
    for model_id in ("tiny-llama", "smollm2-135m"):
        shutil.copy(CONFIGS_DIR / "models" / f"{model_id}.yaml", tmp_path / "models")
    return tmp_path


def profile(configs: Path, body: dict) -> Path:
    path = configs / "profiles" / "p.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def test_deep_merge_sets_leaves_and_keeps_the_rest() -> None:
    base = {"a": 1, "b": {"c": 2, "d": {"e": 3, "f": 4}}, "g": [1, 2]}
    assert deep_merge(base, {"b": {"d": {"e": 30}}, "g": [9], "h": {"i": 1}}) == {
        "a": 1, "b": {"c": 2, "d": {"e": 30, "f": 4}}, "g": [9], "h": {"i": 1}}
    assert base["b"]["d"]["e"] == 3  # the file's own data is not changed


def test_an_override_changes_only_the_fields_it_names(configs: Path) -> None:
    path = profile(configs, {
        "models": ["tiny-llama", "smollm2-135m"], "default": "tiny-llama",
        "overrides": {"tiny-llama": {
            "autoscaling": {"min_replicas": 0, "initial_replicas": 0, "max_replicas": 2,
                            "downscale_to_zero_delay_s": 75},
            "ray_actor_options": {"resources": {"models": 1}},
            "harvest_actor_options": {"num_cpus": 0.25, "resources": {"harvest": 1}},
        }},
    })
    catalog = load_catalog(path, configs_dir=configs)
    tiny, smol = catalog.models["tiny-llama"], catalog.models["smollm2-135m"]
    assert tiny.autoscaling.model_dump() == {
        "min_replicas": 0, "max_replicas": 2, "initial_replicas": 0, "target_ongoing_requests": 16,
        "downscale_delay_s": 600, "downscale_to_zero_delay_s": 75}
    # num_cpus 0.5 stays the file's: the override named resources alone
    assert tiny.ray_actor_options.model_dump() == {"num_cpus": 0.5, "num_gpus": 0, "resources": {"models": 1}}
    assert tiny.engine.max_num_batched_tokens == 32  # type: ignore[attr-defined]  # engine passes extras through
    assert tiny.harvest_placement.model_dump() == {"num_cpus": 0.25, "num_gpus": 0, "resources": {"harvest": 1}}
    # the model without overrides is its file, and its harvests go where its replicas go
    assert smol.autoscaling.min_replicas == 1 and smol.ray_actor_options.resources == {}
    assert smol.harvest_actor_options is None and smol.harvest_placement == smol.ray_actor_options


def test_the_harvest_host_is_placed_on_the_harvest_resources(configs: Path) -> None:
    path = profile(configs, {
        "models": ["tiny-llama", "smollm2-135m"], "default": "tiny-llama",
        "overrides": {"tiny-llama": {"ray_actor_options": {"resources": {"models": 1}},
                                     "harvest_actor_options": {"num_cpus": 0.25, "resources": {"harvest": 1}}},
                      "smollm2-135m": {"ray_actor_options": {"resources": {"models": 1}}}},
    })
    catalog = load_catalog(path, configs_dir=configs)
    tiny, smol = (catalog.models[m].model_dump(by_alias=True) for m in ("tiny-llama", "smollm2-135m"))
    assert host_options(tiny) == {"num_cpus": 0.25, "num_gpus": 0, "resources": {"harvest": 1}}
    assert host_options(smol) == {"num_cpus": 0.5, "num_gpus": 0, "resources": {"models": 1}}


def test_an_override_of_a_model_the_profile_does_not_serve_is_refused(configs: Path) -> None:
    path = profile(configs, {"models": ["tiny-llama"], "overrides": {"llama-8b": {"autoscaling": {}}}})
    with pytest.raises(CatalogError, match="overrides name 'llama-8b', which the profile does not serve"):
        load_catalog(path, configs_dir=configs)


def test_an_override_is_validated_as_the_model_file_is(configs: Path) -> None:
    unknown = profile(configs, {"models": ["tiny-llama"], "overrides": {"tiny-llama": {"gpu_count": 2}}})
    with pytest.raises(CatalogError, match="(?s)with the profile.s overrides.*gpu_count"):
        load_catalog(unknown, configs_dir=configs)
    disordered = profile(configs, {"models": ["tiny-llama"],
                                   "overrides": {"tiny-llama": {"autoscaling": {"min_replicas": 3}}}})
    with pytest.raises(CatalogError, match="min_replicas <= initial_replicas <= max_replicas"):
        load_catalog(disordered, configs_dir=configs)
    bad_resource = profile(configs, {"models": ["tiny-llama"], "overrides": {
        "tiny-llama": {"ray_actor_options": {"resources": {"models": "many"}}}}})
    with pytest.raises(CatalogError, match="resources.models"):
        load_catalog(bad_resource, configs_dir=configs)


def test_an_override_cannot_rename_a_model(configs: Path) -> None:
    path = profile(configs, {"models": ["tiny-llama"], "overrides": {"tiny-llama": {"id": "other"}}})
    with pytest.raises(CatalogError, match="sets `id`"):
        load_catalog(path, configs_dir=configs)


def test_the_cluster_profile_scales_to_zero_on_worker_resources_apart_from_harvests() -> None:
    catalog = load_catalog("cluster")
    assert list(catalog.models) == ["tiny-llama", "smollm2-135m"] and not catalog.colocate
    assert catalog.aliases == {"llama-8b": "tiny-llama"}
    for spec in catalog.models.values():
        assert spec.on_cpu and spec.autoscaling.min_replicas == 0 < spec.autoscaling.max_replicas
        assert spec.autoscaling.downscale_to_zero_delay_s is not None
        assert set(spec.ray_actor_options.resources) == {"models"}
        assert set(spec.harvest_placement.resources) == {"harvest"}
