"""The docs of the code stay true: every path that the README files, the module docstrings and the
comments cite exists, and the README's layout table lists every package.

bench/NOTES.md is a lab notebook of what was measured when: its paths are history, not a map.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOP = ("api", "domain", "deployments", "harvest", "ledger", "cluster", "configs", "tests", "bench")
# A path into the project: a top folder, then names; a file ends in a known suffix, a folder in "/".
PATH = re.compile(r"(?<![\w./-])((?:%s)/(?:[\w.-]+/)*(?:[\w.-]+\.(?:py|yaml|yml|sh|json|md|js|html|css|toml|ini|png|env|example)|))(?![\w/-])"
                  % "|".join(TOP))
DOCS = ["README.md", "bench/README.md", "tests/fuzz/README.md"]
CODE = [p for top in ("api", "domain", "deployments", "harvest", "ledger", "cluster", "tests", "bench")
        for p in (ROOT / top).rglob("*") if p.suffix in {".py", ".sh", ".yaml", ".js", ".html"}
        and "node_modules" not in p.parts and "vendor" not in p.parts and "artifacts" not in p.parts
        and p.name != "test_docs_paths.py"]  # its own examples name stale paths on purpose
# Paths that name what a run makes or what a user types, not files of the checkout.
NOT_FILES = re.compile(r"^(tests/browser/artifacts/|var/|models/|bench/results|api/webapp/static/vendor/)")


def cited_paths(text: str) -> set[str]:
    return {m.group(1) for m in PATH.finditer(text) if not NOT_FILES.match(m.group(1))}


def missing(source: Path) -> list[str]:
    text = source.read_text(errors="replace")
    return sorted(f"{source.relative_to(ROOT)} cites {path}" for path in cited_paths(text)
                  if "*" not in path and "<" not in path and not (ROOT / path).exists())


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_a_readme_cites_exists(doc: str) -> None:
    assert missing(ROOT / doc) == []


def test_every_path_the_code_cites_exists() -> None:
    assert [line for source in sorted(CODE) for line in missing(source)] == []


def test_the_readme_layout_table_lists_every_package() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## Layout"):]
    table = table[:table.index("\n## ", 1)]
    packages = sorted(str(p.parent.relative_to(ROOT)) for top in ("api", "domain", "deployments", "harvest",
                                                                   "ledger", "cluster")
                      for p in (ROOT / top).rglob("__init__.py"))
    assert [p for p in packages if f"`{p}/`" not in table] == []


def test_the_check_sees_a_stale_path() -> None:
    cited = cited_paths("see api/completions/admission.py and ledger/store/ and bench/README.md.")
    assert cited == {"api/completions/admission.py", "ledger/store/", "bench/README.md"}
    # admission.py left api/ for domain/ in issue 34: a doc that still cites it is reported.
    assert [path for path in sorted(cited) if not (ROOT / path).exists()] == ["api/completions/admission.py"]
