"""The product code type-checks: pyright, with the repo's pyrightconfig.json (basic mode, the
venv's packages), finds no error in api, domain, deployments, harvest, ledger and cluster.

pyright runs from the venv (the test extra pins it); its nodejs extra brings Node.js as a wheel,
so the check needs no download and no Node.js of the machine. --outputjson keeps it offline:
pyright-python asks PyPI for a newer version only for a human reader.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "pyrightconfig.json"
TIMEOUT_S = 600


def run_pyright(project: Path, cwd: Path) -> dict[str, Any]:
    """pyright's JSON report for a project (its pyrightconfig.json)."""
    env = {**os.environ, "PYRIGHT_PYTHON_IGNORE_WARNINGS": "1"}
    done = subprocess.run([sys.executable, "-m", "pyright", "--outputjson", "--project", str(project)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    # 0: no errors, 1: errors; anything else is pyright failing (a bad config, no Node.js).
    assert done.returncode in (0, 1), f"pyright failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


def errors_of(report: dict[str, Any]) -> list[str]:
    """Each error as pyright prints it: path:line:column - message (rule), the path from the root."""
    found = []
    for diagnostic in report["generalDiagnostics"]:
        if diagnostic["severity"] != "error":
            continue
        path, start = Path(diagnostic["file"]), diagnostic["range"]["start"]
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        found.append(f"{where}:{start['line'] + 1}:{start['character'] + 1} - {diagnostic['message']}"
                     f" ({diagnostic.get('rule', '')})")
    return found


def product_files() -> list[Path]:
    """The Python files that the config's include names, without the migrations it excludes."""
    include = json.loads(CONFIG.read_text())["include"]
    migrations = ROOT / "ledger" / "store" / "migrations"
    return [path for top in include for path in (ROOT / top).rglob("*.py")
            if migrations not in path.parents and "node_modules" not in path.parts]


def test_the_product_code_has_no_type_errors() -> None:
    report = run_pyright(CONFIG, ROOT)
    errors = errors_of(report)
    if errors:
        pytest.fail(f"pyright found {len(errors)} errors:\n" + "\n".join(errors), pytrace=False)
    # Every product file was checked: a config that missed a folder would pass without looking.
    assert report["summary"]["filesAnalyzed"] == len(product_files())


def test_the_check_sees_a_type_error(tmp_path: Path) -> None:
    (tmp_path / "wrong.py").write_text('count: int = "three"\n')
    (tmp_path / "pyrightconfig.json").write_text(json.dumps({"include": ["wrong.py"], "typeCheckingMode": "basic"}))
    errors = errors_of(run_pyright(tmp_path / "pyrightconfig.json", tmp_path))
    assert len(errors) == 1
    assert errors[0].startswith(f"{tmp_path / 'wrong.py'}:1:14 - ") and errors[0].endswith("(reportAssignmentType)")
