"""The spec's Python programs, unchanged, against the platform through Ray Serve.

The programs of the Read Activations, Steer a Completion, Cheatsheet, Your first
steered Completion and contrast-steering pages come from the shared spec's
docs.md with their indentation put back (tests/programs.py). They import
`compression.zstd` (Python 3.14): `tests/shims` provides it from `zstandard` on
PYTHONPATH, so the programs themselves stay as written.

The programs build vectors of 4096 numbers, llama-8b's hidden size: the
`spec-programs` profile answers `llama-8b` with a random Llama of that width.
The contrast cookbook runs on the embedded default model, in
test_embedded_default.py.
"""
from __future__ import annotations

import ast
import base64
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import httpx
import numpy as np
import pytest
import torch
import zstandard

from deployments.tensor_codec import decode, encode, encode_torch
from tests.programs import SCRIPTS, SHIMS, SOURCES, program_block, program_file, program_text, run_program
from tests.serve_fixtures import ServeInstance
from tests.spec import shared_spec

STEP = np.array([2.0, 4.0, 6.0, 0.0])  # scale 2 times [1, 2, 3, 0]


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_each_program_has_an_indent_for_each_line_of_its_block_and_parses(name: str) -> None:
    """Put back by construction line for line from docs.md: only the indentation is ours."""
    indents = SOURCES[name][3]
    assert len(indents) == len([line for line in program_block(name) if line.strip()])
    ast.parse(program_text(name), name)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_each_cookbook_script_parses_as_docs_md_prints_it(name: str) -> None:
    done = subprocess.run(["sh", "-n", str(program_file(name))], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_a_missing_shared_spec_skips_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("tests.spec.SHARED_SPEC", tmp_path)
    (tmp_path / "docs.md").write_text("# Docs")
    assert shared_spec("docs.md") == tmp_path / "docs.md"
    for ci in (None, "", "false", "0"):
        if ci is None:
            monkeypatch.delenv("CI", raising=False)
        else:
            monkeypatch.setenv("CI", ci)
        with pytest.raises(pytest.skip.Exception, match="no shared spec beside this checkout"):
            shared_spec("openapi.json")
    for ci in ("true", "1", "yes"):
        monkeypatch.setenv("CI", ci)
        with pytest.raises(pytest.fail.Exception, match="openapi.json is missing"):
            shared_spec("openapi.json")


def shim_zstd() -> Any:
    """The test-only `compression.zstd`, imported as the programs import it."""
    sys.path.insert(0, str(SHIMS))
    try:
        from compression import zstd
    finally:
        sys.path.remove(str(SHIMS))
    return zstd


def test_the_shim_reads_what_python_3_14_reads() -> None:
    """One frame that states its size, several frames, and a frame of unknown size."""
    zstd = shim_zstd()
    data = np.arange(1000, dtype=np.float32).tobytes()
    frame = zstd.compress(data)
    assert zstandard.get_frame_parameters(frame).content_size == len(data)
    assert zstd.decompress(frame + zstd.compress(b"tail")) == data + b"tail"
    unsized = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    assert zstd.decompress(unsized.compress(data) + unsized.flush()) == data


def printed(output: str) -> list[Any]:
    """Each printed line as the Python value it shows."""
    return [ast.literal_eval(line) for line in output.splitlines()]


# --- the programs with 4096-number vectors, on the wide test model ------------------------------


@pytest.fixture(scope="class")
def wide(serve_instance: ServeInstance) -> Iterator[tuple[str, str]]:
    with serve_instance.application("spec-programs", "spec-programs", "/spec-programs") as base:
        yield base, serve_instance.new_key("spec-programs")


def read_layers(wide: tuple[str, str], layers: list[int], steer: dict | None = None,
                max_tokens: int = 2) -> np.ndarray:
    base, key = wide
    body: dict[str, Any] = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": max_tokens,
                            "temperature": 0, "output_residual_stream": layers}
    if steer is not None:
        body["apply_steering_vectors"] = [steer]
    r = httpx.post(f"{base}/completions", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=120)
    assert r.status_code == 200, r.text
    return decode(r.json()["activations"]["residual_stream"], max_bytes=1 << 26)


class TestProgramsOnLlama8bWidth:
    def test_read_the_residual_stream(self, wide: tuple[str, str]) -> None:
        shape, first_rows = printed(run_program("read_activations", *wide))
        assert shape == (2, 5, 4096)
        np.testing.assert_allclose(first_rows, read_layers(wide, [0, 2])[:, 0, :4], rtol=1e-6)

    def test_check_the_tensor(self, wide: tuple[str, str]) -> None:
        assert run_program("check_the_tensor", *wide) == "2 5 4096\n"

    def test_the_decode_helper_reads_float32_and_bfloat16(self, wide: tuple[str, str]) -> None:
        helper = helper_namespace("decode_the_tensor")
        array = np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)
        np.testing.assert_array_equal(helper["decode"](encode(array, "torch.float32")), array)
        bfloat16 = helper["decode"](encode_torch(torch.from_numpy(array).to(torch.bfloat16)))
        assert bfloat16.dtype == np.float32
        np.testing.assert_allclose(bfloat16, array, rtol=2**-8)

    def test_steer_a_completion(self, wide: tuple[str, str]) -> None:
        (text,) = printed(run_program("steer_a_completion", *wide))
        assert isinstance(text, str) and text

    def test_an_encoded_vector_steers_as_its_numbers(self, wide: tuple[str, str]) -> None:
        vector = np.zeros(4096)
        vector[:3] = [1, 2, 3]
        encoded = helper_namespace("encode_a_vector")["encode"]([vector])
        as_numbers = read_layers(wide, [1], {"activations": [vector.tolist()], "layer_indices": [1], "scale": 2})
        as_encoded = read_layers(wide, [1], {"activations": encoded, "layer_indices": [1], "scale": 2})
        np.testing.assert_array_equal(as_encoded, as_numbers)

    def test_steer_and_read_in_one_request(self, wide: tuple[str, str]) -> None:
        shape, rows = printed(run_program("steer_and_read", *wide))
        assert shape == (1, 5, 4096)
        # The 4 prompt rows; the generated token at row 4 may differ under the steer.
        baseline = read_layers(wide, [1], zero_steer())[0, :4, :4]
        np.testing.assert_allclose(np.array(rows)[:4] - baseline, np.tile(STEP, (4, 1)), atol=1e-5)

    def test_compare_with_a_zero_scale_baseline(self, wide: tuple[str, str]) -> None:
        texts, difference = printed(run_program("zero_scale_baseline", *wide))
        assert all(isinstance(text, str) for text in texts)
        difference = np.array(difference)
        assert difference.shape == (2, 4, 4)
        np.testing.assert_array_equal(difference[0], 0)  # Layer 0 comes before the steer
        np.testing.assert_allclose(difference[1], np.tile(STEP, (4, 1)), atol=0.011)

    def test_steer_chosen_positions(self, wide: tuple[str, str]) -> None:
        (difference,) = printed(run_program("steer_chosen_positions", *wide))
        expected = np.zeros((2, 4, 4))
        expected[1, 2] = STEP  # only position 2 of Layer 1
        np.testing.assert_allclose(difference, expected, atol=0.011)

    def test_positions_that_a_request_reaches(self, wide: tuple[str, str]) -> None:
        error = json.loads(run_program("positions_reached", *wide))
        assert re.fullmatch(r"req_[0-9a-f]{32}", error.pop("request_id"))
        assert error == {"error": {
            "message": "apply_steering_vectors steers position 5, but the forward passes of this request reach "
                       "position 4 at most: the prompt has 4 tokens and max_tokens is 2, and the last generated "
                       "token never runs through the model. Steer a position up to 4, or raise max_tokens.",
            "type": "invalid_request_error", "param": "apply_steering_vectors", "code": "invalid_request"}}

    def test_your_first_steered_completion(self, wide: tuple[str, str]) -> None:
        shape, captured = printed(run_program("tutorial_capture", *wide))
        assert shape == (1, 5, 4096)
        text, steered = printed(run_program("tutorial_steer", *wide))
        (baseline_text,) = printed(run_program("tutorial_scale0", *wide))
        assert isinstance(text, str) and isinstance(baseline_text, str)
        # Row 0 is the BOS token: the same with or without a steer path, moved by 2 * [1, 2, 3].
        np.testing.assert_allclose(np.array(steered) - np.array(captured), STEP, atol=1e-5)

    def test_a_stream_ends_with_the_activations_chunk(self, wide: tuple[str, str]) -> None:
        """The curl of "Read Activations in a stream", through the Serve proxy."""
        base, key = wide
        body = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2, "stream": True, "temperature": 0,
                "output_residual_stream": [1]}
        with httpx.stream("POST", f"{base}/completions", json=body, timeout=120,
                          headers={"Authorization": f"Bearer {key}"}) as r:
            assert r.status_code == 200
            events = [line.removeprefix("data: ") for line in r.iter_lines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        chunks = [json.loads(event) for event in events[:-1]]
        last = chunks[-1]
        assert last["choices"] == [] and {k: last[k] for k in ("id", "object", "created", "model")} == {
            k: chunks[0][k] for k in ("id", "object", "created", "model")}
        tensor = last["activations"]["residual_stream"]
        assert tensor["shape"] == [1, 5, 4096] and tensor["dtype"] == "float32"
        np.testing.assert_array_equal(decode(tensor, max_bytes=1 << 26), read_layers(wide, [1]))


def zero_steer() -> dict:
    vector = np.zeros(4096)
    vector[:3] = [1, 2, 3]
    return {"activations": [vector.tolist()], "layer_indices": [1], "scale": 0}


def helper_namespace(name: str) -> dict[str, Any]:
    """Run a helper block of the spec (a function, no program around it) with the imports its page uses."""
    namespace: dict[str, Any] = {"base64": base64, "np": np, "zstd": shim_zstd()}
    exec(compile(program_text(name), name, "exec"), namespace)
    return namespace
