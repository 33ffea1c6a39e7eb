"""Every long-lived object is built once, by the composition root (cluster/composition.py; issue 34):
nothing is made on first use and kept on the app's state, and no factory caches what it made."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The areas whose objects the composition builds; the others join as they move (issue 34).
BUILT_ONCE = ("api/jobs", "api/looms", "api/harvests", "api/health", "api/metrics", "api/models", "domain/jobs",
              "domain/looms", "domain/harvests", "domain/metrics", "domain/models.py", "domain/health.py")


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
