"""Every route of the served OpenAPI document, fuzzed by schemathesis over real HTTP with the fuzz User's key.

Each case: no 5xx; status, content type, body and headers as the spec gives them for the route;
an error answer is the spec's error object; and a refused (4xx) answer left no row behind (no held
Hold, work row, Loom, ...: conftest.LEFTOVER_QUERIES). Cases per route: ACS_FUZZ_EXAMPLES in the
fuzzing phase, plus schemathesis' examples and coverage phases (boundary values, wrong types, missing
fields, other methods), which do not depend on the budget.

The document is read from api/openapi.json, the file that GET /openapi.json serves (a test below
holds them equal): schemathesis.pytest.from_fixture, which would read it from the live server,
fails on pytest 9 (it sets `Function._nodeid`, which pytest 9 no longer has), and a module-level
from_url would need the server before collection.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import random
import httpx
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance, response_headers_conformance, response_schema_conformance, status_code_conformance,
)

from api.app import SPEC
from tests.fuzz.conftest import EXAMPLES, SEED, TALLY, LiveServer, check_error_object, check_nothing_left

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          response_headers_conformance]
CONFIG = schemathesis.Config.from_dict({
    "seed": SEED,
    "generation": {"max-examples": EXAMPLES, "database": "none"},
    "phases": {"stateful": {"enabled": False}},
})
schema = schemathesis.openapi.from_path(SPEC, config=CONFIG)
SERVED_MODELS = ["tiny-llama", "llama-8b"]  # the test catalog's model and its alias
KEY_NUMBERS = itertools.count()


def test_the_fuzzed_document_is_the_served_one(fuzz_server: LiveServer) -> None:
    served = httpx.get(f"{fuzz_server.url}/openapi.json", timeout=30)
    assert served.status_code == 200
    assert served.json() == json.loads(SPEC.read_text())


@schema.parametrize()
def test_openapi_routes(case: schemathesis.Case, fuzz_server: LiveServer) -> None:
    choose = choices_of(case)
    use_known_ids(case, choose, fuzz_server)
    use_served_model(case, choose)
    fresh_idempotency_key(case, choose)
    before = fuzz_server.leftovers()
    answer = case.call(base_url=fuzz_server.url, headers=fuzz_server.api_headers(), timeout=60)
    TALLY.count(case.operation.label, answer)
    case.validate_response(answer, checks=CHECKS, headers=fuzz_server.api_headers())
    if answer.status_code >= 400:
        check_error_object(answer)
    if 400 <= answer.status_code < 500:
        check_nothing_left(before, fuzz_server.leftovers())


def choices_of(case: schemathesis.Case) -> random.Random:
    """Random choices that follow from the case's content alone: the same every run of a seed, and while
    Hypothesis shrinks a case. (Not Hypothesis draws: schemathesis leaves its coverage phase out of a
    test with @schema.given.) A value that JSON does not hold counts by its type: a repr may hold an
    address, which changes every run."""
    content = json.dumps([case.method, case.path, case.path_parameters, case.query, case.headers, case.body],
                         sort_keys=True, default=lambda value: type(value).__name__)
    return random.Random(hashlib.sha256(content.encode()).digest())


def use_known_ids(case: schemathesis.Case, choose: random.Random, server: LiveServer) -> None:
    """Half the time the path ids are the User's own, so the case reaches past 404."""
    params = case.path_parameters or {}
    if not params or choose.random() < 0.5:
        return
    known = server.known_ids()
    own = {"model_id": SERVED_MODELS, "loom_id": known["loom"],
           "job_id": known["harvest" if "harvest" in case.operation.path else "job"]}
    for name, ids in own.items():
        if name in params and ids:
            params[name] = choose.choice(ids)
    nodes = known.get(f"nodes:{params.get('loom_id')}")
    if "node_id" in params and nodes:  # a Node of the Loom just chosen
        params["node_id"] = choose.choice(nodes)


def use_served_model(case: schemathesis.Case, choose: random.Random) -> None:
    """Half the time a body's `model` is a served one: the generator's own names are all 400
    model_not_found, which stops a Job, a harvest or a Branch before the rest is checked."""
    if isinstance(case.body, dict) and "model" in case.body and choose.random() < 0.5:
        case.body["model"] = choose.choice(SERVED_MODELS)


def fresh_idempotency_key(case: schemathesis.Case, choose: random.Random) -> None:
    """Mostly a key of its own: the generator repeats its keys, and a repeated key with another body is
    409 idempotency_conflict before any validation. One case in four keeps the generated key."""
    headers = case.headers or {}
    name = next((name for name in headers if name.lower() == "idempotency-key"), None)
    if name is None or not isinstance(headers[name], str) or len(headers[name]) > 240:
        return
    if choose.random() >= 0.25:
        headers[name] = f"{next(KEY_NUMBERS)}-{headers[name]}"
