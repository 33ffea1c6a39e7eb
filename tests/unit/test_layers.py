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


# Routers translate HTTP and nothing else (issue 34): the domain opens every transaction. A route
# module neither opens a ledger session (nor hands a session factory on) nor imports the ledger; the
# one ledger name that it may import is the type of a dependency's value (ApiKeyDep's Principal).
ROUTE_MODULES = ("api/account/*.py", "api/admin/*.py", "api/*/router.py", "api/auth.py")
SESSION_OPENERS = {"sessions", "write_sessions", "session_factory"}
LEDGER_TYPES = {"ledger.accounts.keys": {"Principal"}}


def session_uses(path: Path) -> list[tuple[int, str]]:
    """Each `x.sessions` and `x.write_sessions`, called or handed on (`deliver(services.sessions)`), each
    call of a bare `sessions()`, and `session_factory` named; a module called `sessions` is no session."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in SESSION_OPENERS:
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in SESSION_OPENERS:
            found.append((node.lineno, node.func.id))
        elif isinstance(node, ast.Name) and node.id == "session_factory" and isinstance(node.ctx, ast.Load):
            found.append((node.lineno, node.id))
    return sorted(set(found))


def ledger_imports(path: Path) -> list[tuple[int, str]]:
    """Imports of the ledger, but for the types that LEDGER_TYPES allows."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "ledger"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "ledger":
            allowed = LEDGER_TYPES.get(node.module, set())
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                      if alias.name not in allowed]
    return found


def route_modules() -> list[Path]:
    return sorted({path for pattern in ROUTE_MODULES for path in ROOT.glob(pattern)})


def test_no_route_module_opens_a_session_or_imports_the_ledger() -> None:
    found = [f"{path.relative_to(ROOT)}:{line} {what}"
             for path in route_modules()
             for line, what in [*session_uses(path), *ledger_imports(path)]]
    assert found == []


def test_the_check_sees_a_session_and_a_ledger_import(tmp_path: Path) -> None:
    module = tmp_path / "route.py"
    module.write_text(
        "from ledger.accounts.keys import Principal, authenticate\n"
        "import ledger.tokens.usage\n"
        "from domain.account import sessions\n"
        "async def route(services):\n"
        "    await sessions.end(services, None)\n"
        "    async with services.ledger.write_sessions() as session:\n"
        "        await deliver(services.sessions, session_factory(engine))\n"
        "    async with sessions() as session:\n"
        "        pass\n")
    assert session_uses(module) == [(6, "write_sessions"), (7, "session_factory"), (7, "sessions"), (8, "sessions")]
    assert ledger_imports(module) == [(1, "ledger.accounts.keys.authenticate"), (2, "ledger.tokens.usage")]
