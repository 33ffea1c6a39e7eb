"""The chaos soak's pure parts (bench/chaos_plan.py, bench/chaos_faults.py's targets,
bench/chaos_checks.py's comparison): the kill schedule from a seed, how a stream ended, the
error-object check, the recovery figures."""
from __future__ import annotations

import json
import random
from collections import Counter

import pytest
import torch

from bench.chaos_checks import same
from bench.chaos_faults import pick, targets
from bench.chaos_plan import (BAD_ERROR_EVENT, CONNECTION_END, DONE, DONE_INCOMPLETE, ERROR_EVENT, FAULT_KINDS,
                              SILENT_END, STREAM_OK, answer_problem, error_object_problem, kill_schedule,
                              recovery_figures, stream_end)

ERROR = {"error": {"message": "Inference ended the stream before it was complete.", "type": "upstream_error",
                   "param": None, "code": "upstream_incomplete", "retryable": True, "request_id": "req_1"},
         "request_id": "req_1"}


def chunk(text: str, finish: str | None = None, index: int = 0) -> str:
    return json.dumps({"choices": [{"index": index, "text": text, "finish_reason": finish}]})


def test_the_same_seed_draws_the_same_schedule_and_another_seed_another() -> None:
    first, again, other = (kill_schedule(seed, 600, 50) for seed in (7, 7, 8))
    assert first == again
    assert first != other


def test_a_schedule_has_each_kind_its_share_in_order_inside_the_margins() -> None:
    schedule = kill_schedule(3, 600, 50)
    counts = Counter(kill.kind for kill in schedule)
    assert len(schedule) == 50 and set(counts) == set(FAULT_KINDS)
    assert all(counts[kind] in (7, 8) for kind in FAULT_KINDS)  # 50 = 7 x 7 + 1 drawn
    moments = [kill.at_s for kill in schedule]
    assert moments == sorted(moments)
    assert 20 <= moments[0] and moments[-1] <= 580  # the margin: 20 s, a tenth of a short soak


def test_a_short_schedule_still_has_every_kind_and_named_kinds_only() -> None:
    assert Counter(k.kind for k in kill_schedule(1, 120, 7)) == Counter(FAULT_KINDS)
    assert {k.kind for k in kill_schedule(1, 120, 8, ("redis", "runner"))} == {"redis", "runner"}
    assert all(12 <= k.at_s <= 108 for k in kill_schedule(1, 120, 8))
    with pytest.raises(ValueError):
        kill_schedule(1, 0, 3)


@pytest.mark.parametrize(("events", "broke", "end"), [
    ([chunk("The"), chunk(" sky", "length"), "[DONE]"], False, DONE),
    ([chunk("a", index=0), chunk("b", "stop", index=1), "[DONE]"], False, DONE_INCOMPLETE),  # choice 0 never ended
    ([chunk("The"), "[DONE]"], False, DONE_INCOMPLETE),  # a cut stream that looks complete
    ([chunk("The"), json.dumps(ERROR), "[DONE]"], False, ERROR_EVENT),
    ([chunk("The"), json.dumps(ERROR)], True, ERROR_EVENT),
    ([chunk("The")], True, CONNECTION_END),
    ([], True, CONNECTION_END),
    ([chunk("The")], False, SILENT_END),  # the body ended cleanly with nothing said
    ([chunk("The"), json.dumps({"error": {"message": "boom"}, "request_id": "r"}), "[DONE]"], False, BAD_ERROR_EVENT),
    ([chunk("The"), "Internal Server Error"], False, BAD_ERROR_EVENT),
])
def test_a_streams_end(events: list[str], broke: bool, end: str) -> None:
    assert stream_end(events, broke) == end
    assert (end in STREAM_OK) == (end in (DONE, ERROR_EVENT, CONNECTION_END))


def test_the_spec_error_object_passes_and_each_fault_is_named() -> None:
    assert error_object_problem(ERROR) is None
    assert error_object_problem(ERROR, in_stream=True) is None
    assert error_object_problem({**ERROR, "error": {**ERROR["error"], "retry_after_seconds": 3}}) is None
    bare = {**ERROR, "error": {k: v for k, v in ERROR["error"].items() if k != "request_id"}}
    assert error_object_problem(bare) is None  # an answer's error object may leave its id out...
    assert error_object_problem(bare, in_stream=True) == "missing error.request_id"  # ...a stream's error event not
    assert error_object_problem({**ERROR, "error": {**ERROR["error"], "request_id": "req_2"}}, in_stream=True) == \
        "error.request_id is not the request_id"
    assert error_object_problem({"error": ERROR["error"]}) == 'not {"error": {...}, "request_id": ...}'
    assert error_object_problem({**ERROR, "request_id": "req 1"}) == "request_id 'req 1' is not a request id"
    no_code = {**ERROR, "error": {k: v for k, v in ERROR["error"].items() if k != "code"}}
    assert error_object_problem(no_code) == "missing error.code"
    assert error_object_problem({**ERROR, "error": {**ERROR["error"], "detail": "x"}}) == \
        "keys the spec does not have: error.detail"
    assert error_object_problem({**ERROR, "error": {**ERROR["error"], "type": "server_error"}}) == \
        "type 'server_error' is not one of the spec's"
    assert error_object_problem({"detail": "Internal Server Error"}) == 'not {"error": {...}, "request_id": ...}'
    assert error_object_problem({**ERROR, "extra": 1}) == 'not {"error": {...}, "request_id": ...}'


def test_an_answer_is_checked_only_when_it_is_an_error() -> None:
    assert answer_problem(200, "not json at all") is None
    assert answer_problem(503, json.dumps(ERROR)) is None
    assert answer_problem(502, "Bad Gateway") == "502 with a body that is not JSON: 'Bad Gateway'"
    assert answer_problem(500, json.dumps({"detail": "x"})) == '500: not {"error": {...}, "request_id": ...}'


def test_recovery_figures_take_p50_and_max_of_the_recovered_and_count_the_rest() -> None:
    figures = recovery_figures({"runner": [3.0, 1.0, 2.0, None], "redis": [None]})
    assert figures["runner"] == {"kills": 4, "recovered": 3, "p50_s": 2.0, "max_s": 3.0}
    assert figures["redis"] == {"kills": 1, "recovered": 0, "p50_s": None, "max_s": None}


def test_a_fault_kind_targets_its_processes_only() -> None:
    found = {"ingress": [{"pid": 11}, {"pid": 12}], "model:tiny-llama": [{"pid": 21}], "runner": [{"pid": 31}],
             "harvest_host:tiny-llama": [{"pid": 41}], "harvest_run": [{"pid": 42}], "raylet:head": [{"pid": 1}],
             "raylet:models": [{"pid": 2}], "raylet:harvest": [{"pid": 3}], "controller": [{"pid": 5}]}
    assert targets(found, "ingress") == [("ingress", 11), ("ingress", 12)]
    assert targets(found, "model") == [("model:tiny-llama", 21)]
    assert targets(found, "harvest") == [("harvest_host:tiny-llama", 41), ("harvest_run", 42)]
    assert targets(found, "raylet") == [("raylet:harvest", 3), ("raylet:models", 2)]  # never the head's


def test_harvest_files_compare_exactly_within_tolerance_or_differ() -> None:
    a = {"layer_0": torch.ones(2, 3), "layer_1": torch.zeros(2, 3)}
    assert same(a, {k: v.clone() for k, v in a.items()}) == "exact"
    assert same(a, {"layer_0": a["layer_0"] + 1e-6, "layer_1": a["layer_1"]}) == "close"
    assert same(a, {"layer_0": a["layer_0"] + 0.1, "layer_1": a["layer_1"]}) == "differ"
    assert same(a, {"layer_0": a["layer_0"]}) == "differ"



def test_a_fault_picks_a_kind_of_process_first_so_the_one_harvest_host_is_as_likely_as_many_runs() -> None:
    found = {"harvest_host:tiny-llama": [{"pid": 1}], "harvest_run": [{"pid": 100 + i} for i in range(30)],
             "raylet:models": [{"pid": 2}], "raylet:harvest": [{"pid": 3}]}
    rng = random.Random(5)
    picked = Counter(pick(found, "harvest", rng)[0] for _ in range(400))  # type: ignore[index]
    assert 150 <= picked["harvest_host:tiny-llama"] <= 250, picked  # a pick by pid: about 13 of 400
    assert pick(found, "raylet", rng, leave={"raylet:models"}) == ("raylet:harvest", 3)  # a node being started again
    assert pick(found, "raylet", rng, leave={"raylet:models", "raylet:harvest"}) is None
    assert pick(found, "runner", rng) is None
