"""The spec's own programs, taken from its docs.md and run as a user runs them.

The spec's text stays in ../shared/spec (`spec_docs`); this project keeps only
what it adds. docs.md lost the leading whitespace of its code blocks (DESIGN.md:
indent the programs back when you run them), so each Python program keeps its
indentation here, one digit per non-blank line of its block: the indent in steps
of 4 spaces. The shell scripts run as docs.md prints them: sh needs no indentation.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

from tests.spec import spec_docs

# Python 3.14's compression.zstd, for the programs' subprocesses only.
SHIMS = Path(__file__).resolve().parent / "shims"

# program -> (page, section anchor, which Python block of the section, indent of each non-blank line)
SOURCES = {
    "read_activations": ("/docs/activations", "read-the-residual-stream", 0, "000000111210011110000"),
    "decode_the_tensor": ("/docs/activations", "decode-the-tensor", 0, "011121"),
    "check_the_tensor": ("/docs/activations", "check-the-tensor-before-you-use-it", 0,
                         "0000001112100111100000000"),
    "steer_a_completion": ("/docs/cheatsheet", "steer-a-completion", 0, "0000000111100"),
    "encode_a_vector": ("/docs/steering", "encode-a-steering-vector", 0, "000011222221"),
    "steer_and_read": ("/docs/steering", "steer-and-read-in-one-request", 0, "00000011121000011112210000"),
    "zero_scale_baseline": ("/docs/steering", "compare-with-a-zero-scale-baseline", 0,
                            "0000001112100001111122100111112210000"),
    "steer_chosen_positions": ("/docs/steering", "steer-chosen-positions", 0, "00000011121000100111110011111000"),
    "positions_reached": ("/docs/steering", "positions-that-a-request-reaches", 0, "00000012222101"),
    "tutorial_capture": ("/docs/tutorials/first-steered-completion", "capture-activations", 0,
                         "0000001112100111110000"),
    "tutorial_steer": ("/docs/tutorials/first-steered-completion", "steer-layer-1", 0,
                       "00000011121000011111223210000"),
    "tutorial_scale0": ("/docs/tutorials/first-steered-completion", "compare-with-scale-0", 0,
                        "0000000111112232100"),
    "contrast": ("/docs/cookbook/contrast-steering", "build-the-contrast-vector-and-steer-with-it", 0,
                 "0000000111210122221110011110011110010001222223211"),
    # Run against a harvest in test_e2e_harvest.py. The page's third harvest program
    # (Project onto directions) lost part of its text in docs.md, so it cannot run as it is.
    "harvest_download": ("/docs/harvest", "download-the-files", 0, "000000000012234000"),
    "harvest_manifest": ("/docs/harvest", "read-the-manifest-and-the-statistics", 0, "0000000000000"),
}
# shell script -> (page, section anchor, the block's language)
SCRIPTS = {
    "harvest.sh": ("/docs/cookbook/harvest-script", "run-the-script", "sh"),  # run in test_embedded_default.py
    "job.sh": ("/docs/cookbook/job-script", "run-the-script", "bash"),  # run in test_e2e_jobs.py
}


@lru_cache
def docs_blocks(language: str = "python") -> dict[tuple[str, str], list[list[str]]]:
    """The code blocks of one language in docs.md by (page, section anchor)."""
    blocks: dict[tuple[str, str], list[list[str]]] = {}
    page = anchor = ""
    lines = iter(spec_docs().splitlines())
    for line in lines:
        if m := re.match(r"# .* \((/docs[^)]*)\)$", line):
            page, anchor = m.group(1), ""
        elif m := re.match(r"#+ .* \[#([^\]]+)\]$", line):
            anchor = m.group(1)
        elif line.startswith(f"```{language}"):
            block = []
            for inner in lines:
                if inner.startswith("```"):
                    break
                block.append(inner)
            blocks.setdefault((page, anchor), []).append(block)
    return blocks


def program_block(name: str) -> list[str]:
    """Python program `name` as docs.md prints it: without its indentation."""
    page, anchor, index, _ = SOURCES[name]
    return docs_blocks()[(page, anchor)][index]


def program_text(name: str) -> str:
    """Python program `name`: its block of docs.md with its indentation put back."""
    indents = iter(SOURCES[name][3])
    return "".join(" " * 4 * int(next(indents)) + line + "\n" if line.strip() else "\n"
                   for line in program_block(name))


def script_text(name: str) -> str:
    """Shell script `name` (harvest.sh), as docs.md prints it."""
    page, anchor, language = SCRIPTS[name]
    return "".join(line + "\n" for line in docs_blocks(language)[(page, anchor)][0])


@lru_cache
def programs_folder() -> tempfile.TemporaryDirectory:
    """A temporary folder for this test session's programs: kept by the cache, removed at exit."""
    return tempfile.TemporaryDirectory(prefix="acs-spec-programs-")


def program_file(name: str) -> Path:
    """The program (contrast.py) or script (harvest.sh) `name`, written out to run as a user runs it."""
    path = Path(programs_folder().name) / name
    path.write_text(script_text(name) if name in SCRIPTS else program_text(name.removesuffix(".py")))
    return path


def run_program(name: str, base: str, key: str) -> str:
    """Run Python program `name` against `base` with `key`; what it printed."""
    env = {**os.environ, "ACS_API_BASE": base, "ACS_API_KEY": key, "PYTHONPATH": str(SHIMS)}
    done = subprocess.run([sys.executable, str(program_file(f"{name}.py"))], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
