"""Imports point down only (DESIGN.md, "Layers"): cluster -> api -> domain -> harvest ->
deployments -> ledger, and the ledger is the bottom. Imports inside functions count too: a
late import is still a dependency. The domain knows nothing of HTTP."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What each package may not import.
FORBIDDEN = {
    "api": {"cluster"},
    "domain": {"api", "cluster", "fastapi", "starlette"},
    "harvest": {"api", "domain", "cluster"},
    "deployments": {"api", "domain", "harvest", "cluster"},
    "ledger": {"api", "domain", "cluster", "deployments", "harvest"},
}


def imported_packages(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def upward_imports(package: str) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line} imports {name}"
            for path in sorted((ROOT / package).rglob("*.py"))
            for line, name in imported_packages(path)
            if name.split(".")[0] in FORBIDDEN[package]]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_down(package: str) -> None:
    assert upward_imports(package) == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "late.py"
    module.write_text("def f():\n    from domain.errors import ApiError\n    import cluster.admin\n")
    assert imported_packages(module) == [(2, "domain.errors"), (3, "cluster.admin")]


def test_the_runner_imports_no_kind_of_work() -> None:
    """A new kind is a handler registered by the composition root: no edit to the Runner."""
    runner = ROOT / "deployments" / "background" / "runner.py"
    names = [name for _, name in imported_packages(runner)]
    assert not [name for name in names if name.startswith(("api", "domain", "harvest", "cluster"))]
    assert "WorkKind.job" not in runner.read_text()
