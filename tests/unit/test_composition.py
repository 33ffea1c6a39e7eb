"""Every long-lived object is built once, by the composition root (cluster/composition.py; issue 34):
nothing is made on first use and kept on the app's state, no factory caches what it made, and the
services are frozen, typed without Any, and built nowhere else."""
from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest

from cluster.composition import build_runner, compose, services_with_runner
from deployments.background.protocols import Settlement
from deployments.background.runner import Runner
from domain.services import IngressReplica, Services
from ledger.accounts.mail import Mailer
from ledger.work.tables import WorkKind

ROOT = Path(__file__).resolve().parents[2]
# The areas whose objects the composition builds; the others join as they move (issue 34).
BUILT_ONCE = ("api/jobs", "api/looms", "api/harvests", "api/health", "api/metrics", "api/models", "api/webapp",
              "domain/jobs", "domain/looms", "domain/harvests", "domain/metrics", "domain/models.py",
              "domain/health.py", "domain/settings.py", "domain/services.py", "cluster")


def _is_state(node: ast.AST) -> bool:
    """An app's state (`app.state`, `request.app.state`); a request's own state lives as long as the request."""
    if not (isinstance(node, ast.Attribute) and node.attr == "state"):
        return False
    owner = node.value
    return (isinstance(owner, ast.Attribute) and owner.attr == "app") or (isinstance(owner, ast.Name)
                                                                          and owner.id == "app")


def kept_on_the_state(tree: ast.AST) -> list[str]:
    """What a module keeps on an app's state (or reads from it) besides the services."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_state(node.value) and node.attr != "services":
            found.append(f"line {node.lineno}: {node.attr} on the state")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr")
              and len(node.args) > 1 and _is_state(node.args[0])
              and not (isinstance(node.args[1], ast.Constant) and node.args[1].value == "services")):
            found.append(f"line {node.lineno}: {node.func.id} on the state")
    return found


def cached_factories(tree: ast.AST) -> list[str]:
    return [f"line {node.lineno}: {node.name}" for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            for decorator in node.decorator_list
            if ast.unparse(decorator).split("(")[0].rsplit(".", 1)[-1] in ("lru_cache", "cache")]


def found_in(paths: list[Path], check) -> dict[str, list[str]]:
    return {str(path.relative_to(ROOT)): found for path in paths
            if (found := check(ast.parse(path.read_text(), str(path))))}


def test_the_api_keeps_nothing_on_the_apps_state_but_the_services() -> None:
    assert found_in(sorted((ROOT / "api").rglob("*.py")), kept_on_the_state) == {}


@pytest.mark.parametrize("area", BUILT_ONCE)
def test_no_factory_caches_what_it_made(area: str) -> None:
    path = ROOT / area
    assert found_in([path] if path.is_file() else sorted(path.rglob("*.py")), cached_factories) == {}


def test_the_checks_see_a_lazy_object() -> None:
    tree = ast.parse("from functools import lru_cache\n"
                     "@lru_cache(maxsize=8)\n"
                     "def storage_for(root): ...\n"
                     "def routes(request):\n"
                     "    state = getattr(request.app.state, 'routes', None)\n"
                     "    request.app.state.readings = Readings()\n"
                     "    request.state.principal = None\n"
                     "    return request.app.state.services\n")
    assert kept_on_the_state(tree) == ["line 5: getattr on the state", "line 6: readings on the state"]
    assert cached_factories(tree) == ["line 3: storage_for"]


# -- the services: frozen, typed, built by the composition root alone ---------------------------------------

# What builds the services, or parts made with them: cluster/ calls these, and nothing below it.
BUILDERS = {"compose", "Services", "IngressReplica", "services_with_runner", "build_runner"}
PRODUCT_BELOW_CLUSTER = ("api", "domain", "deployments", "harvest", "ledger")


def builder_calls(tree: ast.AST) -> list[str]:
    """The calls of a builder of the services, by its name or as an attribute (`composition.compose(...)`)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name in BUILDERS:
                found.append(f"line {node.lineno}: {name}(")
    return found


def any_inside(hint: object) -> bool:
    """Whether `hint` is Any or holds it (dict[str, Any], Callable[[Any], None], X | Any)."""
    if isinstance(hint, list):  # a Callable's parameters
        return any(any_inside(argument) for argument in hint)
    return hint is Any or any(any_inside(argument) for argument in get_args(hint))


def test_only_the_composition_root_builds_the_services() -> None:
    paths = [path for package in PRODUCT_BELOW_CLUSTER for path in sorted((ROOT / package).rglob("*.py"))]
    assert found_in(paths, builder_calls) == {}


def test_the_builder_check_sees_a_call() -> None:
    tree = ast.parse("from cluster import composition\n"
                     "services = composition.compose(settings, catalog, clients, engine)\n"
                     "copy = Services(settings=settings)\n"
                     "composed = compose_later()\n")
    assert builder_calls(tree) == ["line 2: compose(", "line 3: Services("]


@pytest.mark.parametrize("built", [Services, IngressReplica])
def test_no_part_of_the_services_is_typed_any(built: type) -> None:
    hints = get_type_hints(built)
    assert hints and [name for name, hint in hints.items() if any_inside(hint)] == []


@pytest.mark.parametrize("builder", [compose, build_runner, Runner.__init__])
def test_the_wiring_takes_no_any(builder: object) -> None:
    hints = get_type_hints(builder)
    assert [name for name, hint in hints.items() if any_inside(hint)] == []


def test_the_runner_takes_a_settlement_not_the_ledger_of_a_layer_above() -> None:
    assert get_type_hints(Runner.__init__)["ledger"] is Settlement


def test_the_any_check_sees_any_inside_a_type() -> None:
    assert any_inside(dict[str, Any]) and any_inside(Callable[[Any], None]) and any_inside(int | Any)
    assert not any_inside(Callable[[WorkKind], None]) and not any_inside(Mailer | None)


async def test_the_services_are_not_changed_once_built(fake_stack: Any) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        fake_stack.services.wake_runner = print
    with pytest.raises(dataclasses.FrozenInstanceError):
        IngressReplica(fake_stack.services).resident = None  # type: ignore[misc]


async def test_the_routes_ring_the_runner_beside_them(fake_stack: Any) -> None:
    """In one process the doorbell joins the two, built before both: work the routes queue wakes the
    Runner's claim loop of its kind, and no part is changed after it is built."""
    base = fake_stack.services
    clients = {model_id: gateway.client for model_id, gateway in base.gateways.items()}
    services, runner = services_with_runner(base.settings, base.catalog, clients, base.sessions.kw["bind"],
                                            tokenizers=base.tokenizers, counts=base.counts)
    wanted = runner._wanted[WorkKind.job]
    assert not wanted.is_set()
    services.wake_runner(WorkKind.job)
    assert wanted.is_set()
    assert services.mailer is runner.mailer and services.ledger is runner.ledger
