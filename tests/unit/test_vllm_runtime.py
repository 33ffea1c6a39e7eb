"""vLLM's temporary files go to the project's .vllm_cache/tmp while an engine starts, and the
engine's shutdown removes the files made then: a folder made then (torchinductor's kernel cache)
is not among them, so the shutdown neither fails on it nor throws the cache away."""
from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

from deployments.vllm_runtime import project_temp_files


def test_the_files_made_meanwhile_are_listed_and_a_folder_is_not() -> None:
    name = uuid.uuid4().hex
    with project_temp_files() as made:
        folder = Path(tempfile.gettempdir())
        assert os.environ["TMPDIR"] == str(folder) and folder.name == "tmp"
        rendezvous = folder / f"vllm_dist_{name}"
        rendezvous.write_text("")
        cache = folder / f"torchinductor_{name}"
        cache.mkdir()
    try:
        assert made == [rendezvous]
        assert tempfile.gettempdir() != str(folder)
    finally:
        rendezvous.unlink(missing_ok=True)
        cache.rmdir()
