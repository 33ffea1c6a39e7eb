"""Runs the workshop notebook (api/webapp/downloads/workshop.ipynb) the two ways a reader does: with
`ACS_API_KEY` set (nbclient, top to bottom, failing on any cell's error), and without it, answering the
Set up cell's `getpass` through the kernel's stdin channel as JupyterLab does."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import nbformat

# What the test adds after the last cell: the steered texts, for the test to compare.
REPORT = 'import json\nprint("WORKSHOP " + json.dumps({"model": MODEL, "layer": LAYER, "steered": steered}))'
# Variables that a reader's shell would not have and that could steer the notebook elsewhere.
NOT_PASSED = ("ACS_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY")


@dataclass
class WorkshopRun:
    report: dict[str, Any]
    outputs: list[str]  # every text that a cell showed (streams, results, errors)
    stdin_requests: list[dict[str, Any]] = field(default_factory=list)


def kernel_environment(base: str, key: str | None) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in NOT_PASSED + ("ACS_API_KEY",)}
    env["ACS_API_BASE"] = base
    if key is not None:
        env["ACS_API_KEY"] = key
    return env


def with_report(text: str) -> Any:
    notebook = nbformat.reads(text, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(REPORT))
    return notebook


def shown_texts(messages: list[dict[str, Any]]) -> list[str]:
    texts = []
    for content in messages:
        if "text" in content:
            texts.append(content["text"])
        for value in (content.get("data") or {}).values():
            texts.append(value if isinstance(value, str) else json.dumps(value))
        if "evalue" in content:
            texts.append(f"{content.get('ename')}: {content['evalue']}")
    return texts


def report_of(texts: list[str]) -> dict[str, Any]:
    lines = [line for text in texts for line in text.splitlines() if line.startswith("WORKSHOP ")]
    assert len(lines) == 1, lines
    return json.loads(lines[0].removeprefix("WORKSHOP "))


def run_with_key(text: str, base: str, key: str, timeout_s: int = 600) -> WorkshopRun:
    """nbclient, as `jupyter nbconvert --execute` runs it: a cell's error raises CellExecutionError."""
    from nbclient import NotebookClient

    notebook = with_report(text)
    NotebookClient(notebook, timeout=timeout_s, kernel_name="python3").execute(env=kernel_environment(base, key))
    texts = shown_texts([dict(output) for cell in notebook.cells for output in cell.get("outputs", [])])
    return WorkshopRun(report_of(texts), texts)


def run_asking_for_the_key(text: str, base: str, key: str, timeout_s: int = 600) -> WorkshopRun:
    """Without ACS_API_KEY: the kernel asks for the key on its stdin channel, and this answers it."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", env=kernel_environment(base, None))
    requests: list[dict[str, Any]] = []
    shown: list[dict[str, Any]] = []

    def answer(message: dict[str, Any]) -> None:
        requests.append(dict(message["content"]))
        client.input(key)

    def output(message: dict[str, Any]) -> None:
        if message["msg_type"] in ("stream", "execute_result", "display_data", "error"):
            shown.append(dict(message["content"]))

    try:
        for cell in with_report(text).cells:
            if cell.cell_type != "code":
                continue
            reply = client.execute_interactive(cell.source, allow_stdin=True, stdin_hook=answer,
                                               output_hook=output, timeout=timeout_s)
            content = reply["content"]
            assert content["status"] == "ok", f"{content.get('ename')}: {content.get('evalue')}\n{cell.source}"
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    texts = shown_texts(shown)
    return WorkshopRun(report_of(texts), texts, requests)
