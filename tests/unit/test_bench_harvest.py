"""bench/harvest.py names each harvest process by its role (the torch engine's memory is the ModelHost's)
and says whether issue 39's goal was met, or that it was not measured."""
from __future__ import annotations

from typing import Any

import pytest

from bench.harvest import comparisons, role_of_command, summary_lines


@pytest.mark.parametrize(("command", "role"), [
    # Ray titles an actor's process ray::<Class>, and ray::<Class>.<method> while a call runs.
    ("ray::ModelHost", "ModelHost"),
    ("ray::ModelHost.forward", "ModelHost"),
    ("ray::HarvestRun.status", "HarvestRun"),
    ("ray::MapWorker(MapBatches(Forward))", "MapWorker"),
    ("VLLM::EngineCore", "vLLM EngineCore"),
    ("ray::IDLE", None),
    ("python bench/harvest.py", None),
])
def test_each_harvest_process_gets_its_role(command: str, role: str | None) -> None:
    assert role_of_command(command) == role


def harvest(forward_tok_s: float, e2e_tok_s: float, wall_s: float, by_length_tok_s: float) -> dict[str, Any]:
    return {"forward_tok_s": forward_tok_s, "e2e_tok_s": e2e_tok_s, "wall_s": wall_s,
            "ratios": {"by length": {"forward": forward_tok_s / by_length_tok_s,
                                     "e2e": e2e_tok_s / by_length_tok_s}}}


BASELINES: dict[str, dict[str, Any]] = {"by length": {"tok_s": 400.0}}


@pytest.mark.parametrize(("torch_tok_s", "verdict"), [(440.0, "1.10 (met)"), (400.0, "1.00 (met)"),
                                                      (360.0, "0.90 (not met)")])
def test_the_goal_is_the_torch_engines_forward_phase_against_the_loop_by_length(torch_tok_s: float,
                                                                                verdict: str) -> None:
    harvests = {"torch": harvest(torch_tok_s, torch_tok_s * 0.9, 100.0, 400.0),
                "vllm": harvest(200.0, 150.0, 250.0, 400.0)}
    lines = summary_lines(comparisons(BASELINES, harvests))
    ratio = torch_tok_s / 200.0
    assert lines == [
        f"torch / vllm, tokens/s: forward phase {ratio:.2f}, end to end without fixed costs "
        f"{torch_tok_s * 0.9 / 150.0:.2f}, the whole harvest (submit to manifest, fixed costs in) 2.50",
        f"goal: torch forward phase >= 1.0 of the HF loop by length: {verdict}",
    ]


@pytest.mark.parametrize(("engines", "baselines"), [(["vllm"], BASELINES), (["torch"], {"in order": {}})])
def test_without_the_torch_engine_or_the_loop_by_length_the_goal_says_not_measured(
        engines: list[str], baselines: dict[str, dict[str, Any]]) -> None:
    harvests = {engine: harvest(300.0, 300.0, 100.0, 400.0) for engine in engines}
    assert summary_lines(comparisons(baselines, harvests)) == [
        "goal: not measured (it needs the torch engine and the HF loop by length)"]
