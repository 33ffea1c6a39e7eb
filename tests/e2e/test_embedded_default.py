"""The embedded default as its README command runs it (`python -m cluster.embedded`, a
subprocess with its own local Ray and SQLite ledger): reads and steers of SmolLM2-135M
(float32, 30 Layers) equal HF transformers on the same weights, the spec's cookbooks run
unchanged, and the workshop notebook downloaded from the platform runs top to bottom. The profile is colocated and served by Serve's direct ingress: one ingress replica
hosts the engine and the Runner, and answers on the platform's port itself.

Slow (a few minutes on a CPU): `-m "not slow"` leaves it out.
"""
from __future__ import annotations

import ast
import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import httpx
import numpy as np
import psutil
import pytest
import torch

from bench.completions_overhead import Server, embedded_ledger_url, remove_bench_key_file, start_embedded
from cluster.ray_env import free_port
from deployments.tensor_codec import decode
from deployments.catalog import load_catalog
from tests.hf_reference import greedy, reference
from tests.programs import program_file, run_program
from tests.serve_fixtures import read_ledger
from tests.workshop import run_asking_for_the_key, run_with_key

pytestmark = pytest.mark.slow
PROMPT = "The capital of France is"
LAYER = 15
# Two kernels (vLLM's CPU attention and HF's) on numbers up to ~1e2: float32 rounding differs.
TOLERANCE = dict(atol=2e-3, rtol=2e-3)
# What the test session's own Serve instance sets for its applications (tests/conftest.py):
# the embedded default runs without them, as on a fresh machine.
SESSION_ONLY = ("ACS_REDIS_URL", "ACS_METRICS_REDIS_PREFIX", "ACS_SMTP_URL", "ACS_DATABASE_URL", "ACS_PROFILE")
REPLICA_TITLE = "ray::ServeReplica:acs:"


@dataclass
class Platform:
    server: Server
    base: str
    key: str
    port: int
    folder: Path

    def replicas(self) -> list[psutil.Process]:
        """Serve's replicas among the processes the platform started (Ray titles them by class)."""
        found = []
        for pid in self.server.members():
            try:
                process = psutil.Process(pid)
                if (process.cmdline() or [""])[0].startswith(REPLICA_TITLE):
                    found.append(process)
            except psutil.NoSuchProcess:
                pass
        return found

    def engine_cores(self, replica: psutil.Process) -> list[psutil.Process]:
        """vLLM's EngineCore among a replica's processes: vLLM titles it VLLM::EngineCore (its
        name, and its command line where setproctitle rewrites argv), and before that, or where
        setproctitle finds no argv, it is multiprocessing's spawned child (`spawn_main`); the
        resource tracker beside it is neither. A CI run once found its name 'python' while it served."""
        found = []
        for child in replica.children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                command = " ".join(child.cmdline())
                if child.name().startswith("VLLM::EngineCor") or command.startswith("VLLM::EngineCore") \
                        or "spawn_main" in command:
                    found.append(child)
        return found

    def read_ledger(self, read: Any) -> Any:
        return read_ledger(embedded_ledger_url(self.folder), read)


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    # A short folder: Ray's session puts its Unix sockets in it (a path has at most 107 bytes).
    folder = Path(tempfile.mkdtemp(prefix="acs-embedded-"))
    environ = {key: value for key, value in os.environ.items() if key not in SESSION_ONLY}
    environ["ACS_HARVEST_STORAGE"] = str(folder / "harvests")
    port = free_port("127.0.0.1")
    server, base, key = start_embedded(port, folder, start_timeout=900, environ=environ)
    try:
        yield Platform(server, base, key, port, folder)
    finally:
        server.stop(120)
        remove_bench_key_file(folder)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def embedded(platform: Platform) -> tuple[str, str]:
    return platform.base, platform.key


@pytest.fixture(scope="module")
def smollm2() -> Any:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = load_catalog("embedded").models["smollm2-135m"].weights_path()
    return (AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval(),
            AutoTokenizer.from_pretrained(path))


@pytest.fixture(scope="module")
def prompt_ids(smollm2: Any) -> list[int]:
    return smollm2[1](PROMPT)["input_ids"]


def complete(embedded: tuple[str, str], **fields: Any) -> dict:
    base, key = embedded
    body = {"model": "llama-8b", "temperature": 0, **fields}
    r = httpx.post(f"{base}/completions", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()


def layers_of(answer: dict) -> np.ndarray:
    return decode(answer["activations"]["residual_stream"], max_bytes=1 << 28)


def vector(seed: int, norm: float) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(576).astype(np.float32)
    return (v * norm / np.linalg.norm(v)).astype(np.float32)


def steer(v: np.ndarray, **fields: Any) -> dict:
    return {"activations": [v.tolist()], "layer_indices": [LAYER], **fields}


def wait_for(check: Any, timeout_s: float) -> Any:
    """Poll `check` until it returns something true; return that."""
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        assert time.monotonic() < deadline, "it never came"
        time.sleep(0.2)
    return found


def test_a_read_equals_the_reference_on_prompt_and_generated_rows(embedded: Any, smollm2: Any,
                                                                  prompt_ids: list[int]) -> None:
    model, tokenizer = smollm2
    answer = complete(embedded, prompt=prompt_ids, max_tokens=4, output_residual_stream=[29, 0, LAYER])
    ids = greedy(model, prompt_ids, 4)
    assert answer["choices"][0]["text"] == tokenizer.decode(ids[len(prompt_ids):])
    read = layers_of(answer)
    assert read.shape == (3, len(prompt_ids) + 3, 576)
    np.testing.assert_allclose(read, reference(model, ids[:-1], [0, LAYER, 29]), **TOLERANCE)


def test_the_one_ingress_replica_answers_on_the_port_itself_and_runs_jobs(platform: Platform,
                                                                            embedded: tuple[str, str]) -> None:
    (replica,) = platform.replicas()
    assert (replica.cmdline() or [""])[0].startswith(REPLICA_TITLE + "ingress")
    listening = {c.laddr.port for c in replica.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    assert platform.port in listening
    # The request id and the Server-Timing of Serve's proxy middleware, on the replica's own server.
    base, key = embedded
    headers = {"Authorization": f"Bearer {key}"}
    answer = httpx.post(f"{base}/completions", headers={**headers, "X-Request-Id": "mine_1"}, timeout=120,
                        json={"model": "llama-8b", "prompt": PROMPT, "max_tokens": 1})
    assert answer.status_code == 200 and answer.headers.get_list("x-request-id") == ["mine_1"]
    assert {"proxy", "engine", "total"} <= {part.split(";")[0] for part in answer.headers["server-timing"].split(", ")}
    refused = httpx.post(f"{base}/completions", headers={**headers, "X-Request-Id": "not mine!"}, json={}, timeout=30)
    assert refused.status_code == 400 and refused.headers.get_list("x-request-id") == [refused.json()["request_id"]]
    # Background work runs in the same replica: a Job answers what a Completion does.
    body = {"model": "llama-8b", "prompt": PROMPT, "max_tokens": 4, "temperature": 0}
    job = httpx.post(f"{base}/completion-jobs", json=body, headers=headers, timeout=60).json()
    wait_for(lambda: httpx.get(f"{base}/completion-jobs/{job['id']}", headers=headers, timeout=30).json()["status"]
             in ("succeeded", "failed"), 120)
    result = httpx.get(f"{base}/completion-jobs/{job['id']}/result", headers=headers, timeout=30).json()
    assert result["choices"][0]["text"] == complete(embedded, prompt=PROMPT, max_tokens=4)["choices"][0]["text"]


def test_the_engines_process_groups_share_one_gloo_loop_thread(platform: Platform, embedded: tuple[str, str]) -> None:
    # vLLM's CPU engine makes 13 gloo groups; each of their own would wake 100 times a second.
    complete(embedded, prompt=PROMPT, max_tokens=1)  # the engine is up, its groups made
    (replica,) = platform.replicas()
    engines = platform.engine_cores(replica)
    assert len(engines) == 1, [(child, child.cmdline()) for child in replica.children(recursive=True)]
    (engine,) = engines
    names = []
    for thread in engine.threads():
        with contextlib.suppress(FileNotFoundError):
            names.append(Path(f"/proc/{engine.pid}/task/{thread.id}/comm").read_text().strip())
    assert names.count("gloo_tcp_loop") == 1, names


def test_a_steer_moves_its_layer_and_what_follows_as_the_reference(embedded: Any, smollm2: Any,
                                                                   prompt_ids: list[int]) -> None:
    model, tokenizer = smollm2
    v = vector(0, 8.0)
    layers = [LAYER - 1, LAYER, 29]
    baseline = layers_of(complete(embedded, prompt=prompt_ids, max_tokens=1, output_residual_stream=layers,
                                  apply_steering_vectors=[steer(v, scale=0)]))
    moved = layers_of(complete(embedded, prompt=prompt_ids, max_tokens=1, output_residual_stream=layers,
                               apply_steering_vectors=[steer(v, scale=2)]))
    np.testing.assert_array_equal(moved[0], baseline[0])
    # Exact up to float32 rounding at the stream's magnitude (SmolLM2 has entries in the thousands).
    np.testing.assert_allclose(moved[1], baseline[1] + 2 * v, rtol=4e-6, atol=1e-4)
    # Four generated tokens under the steer: the later Layer and the tokens follow the steered reference.
    answer = complete(embedded, prompt=prompt_ids, max_tokens=4, output_residual_stream=layers,
                      apply_steering_vectors=[steer(v, scale=2)])
    ids = greedy(model, prompt_ids, 4, {LAYER: 2 * v})
    assert answer["choices"][0]["text"] == tokenizer.decode(ids[len(prompt_ids):])
    np.testing.assert_allclose(layers_of(answer), reference(model, ids[:-1], layers, {LAYER: 2 * v}), **TOLERANCE)


def test_norm_match_scales_to_the_streams_norm(embedded: Any, prompt_ids: list[int]) -> None:
    v = vector(1, 1.0)
    baseline = layers_of(complete(embedded, prompt=prompt_ids, max_tokens=1, output_residual_stream=[LAYER],
                                  apply_steering_vectors=[steer(v, scale=0, norm_match=True)]))[0]
    moved = layers_of(complete(embedded, prompt=prompt_ids, max_tokens=1, output_residual_stream=[LAYER],
                               apply_steering_vectors=[steer(v, scale=0.25, norm_match=True)]))[0]
    ratio = np.linalg.norm(moved - baseline, axis=-1) / np.linalg.norm(baseline, axis=-1)
    np.testing.assert_allclose(ratio, 0.25, rtol=1e-3)


def test_a_position_reached_in_decode_is_the_only_one_steered(embedded: Any, prompt_ids: list[int]) -> None:
    position = len(prompt_ids) + 1  # the second generated token runs there
    rows = [[vector(2, 8.0).tolist()]]

    def read(scale: float) -> np.ndarray:
        return layers_of(complete(embedded, prompt=prompt_ids, max_tokens=3, output_residual_stream=[LAYER],
                                  apply_steering_vectors=[{"activations": rows, "layer_indices": [LAYER],
                                                           "position_indices": [position], "scale": scale}]))[0]

    baseline, moved = read(0.0), read(1.0)
    changed = np.abs(moved - baseline).max(axis=-1) > 1e-3
    assert np.flatnonzero(changed).tolist() == [position]
    np.testing.assert_allclose(moved[position] - baseline[position], rows[0][0], atol=1e-3)


def test_the_contrast_cookbook_steers_the_text(embedded: tuple[str, str]) -> None:
    (shape, norm), *lines = [line.split(" ", 1) for line in run_program("contrast", *embedded).splitlines()]
    assert ast.literal_eval(shape) == (576,) and float(norm) > 0
    texts = {int(scale): ast.literal_eval(text) for scale, text in lines}
    assert sorted(texts) == [0, 4, 8]
    plain = complete(embedded, prompt="My advice for your first day at a new job is", max_tokens=16)
    assert texts[0] == plain["choices"][0]["text"]  # scale 0 adds nothing: not one number changes
    assert texts[8] != texts[0]


def test_the_cookbooks_harvest_script_runs_as_it_is(embedded: tuple[str, str], smollm2: Any, tmp_path: Any) -> None:
    """harvest.sh reads Layers 8, 16 and 24: the embedded default has 30."""
    import subprocess

    from safetensors.torch import load_file

    base, key = embedded
    env = {**os.environ, "ACS_API_BASE": base, "ACS_API_KEY": key}
    done = subprocess.run(["sh", str(program_file("harvest.sh"))], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert " is done" in done.stderr and "Downloaded the files into harvest-" in done.stderr
    (folder,) = tmp_path.glob("harvest-*")
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "shard_00000.safetensors",
                                                       "stats.safetensors"]
    tensors = load_file(folder / "shard_00000.safetensors")
    assert tensors["prompt_0"].dtype == torch.bfloat16 and tuple(tensors["prompt_0"].shape)[::2] == (3, 576)
    tokenizer = smollm2[1]
    assert [tensors[f"tokens_{i}"].tolist() for i in (0, 1)] == [
        tokenizer(text)["input_ids"] for text in ("The sky is", "Grass is")]


@pytest.fixture(scope="module")
def workshop(platform: Platform) -> str:
    """The workshop notebook as a reader gets it: downloaded from the platform's stable path."""
    answer = httpx.get(f"{platform.base.removesuffix('/v1')}/downloads/workshop.ipynb", timeout=60)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/x-ipynb+json"
    return answer.text


def test_the_workshop_notebook_runs_top_to_bottom_and_its_steer_arrives(embedded: tuple[str, str],
                                                                        workshop: str) -> None:
    base, key = embedded
    run = run_with_key(workshop, base, key)
    # The default model of GET /v1/models, at its own middle Layer (SmolLM2 has 30).
    assert (run.report["model"], run.report["layer"]) == ("smollm2-135m", 15)
    # Not Llama 3.1 8B: the first scale adds a quarter of the stream's norm at the Layer, then twice that.
    steered = {float(scale): text for scale, text in run.report["steered"].items()}
    low, high = sorted(steered)[1:]
    assert sorted(steered)[0] == 0 and 0 < low and high == 2 * low
    plain = complete(embedded, prompt="My advice for your first day at a new job is", max_tokens=16)
    assert steered[0] == plain["choices"][0]["text"]  # scale 0 adds nothing
    assert steered[low] != steered[0] and steered[high] != steered[0]  # the steer arrived
    shown = "".join(run.outputs)
    assert f"Layer 15 moved by {low} times the contrast." in shown  # the exercise's read of the Layer
    assert "the steer arrived" in shown
    assert not any(key in text for text in run.outputs)


def test_the_workshop_notebook_asks_for_the_key_without_showing_it(embedded: tuple[str, str],
                                                                   workshop: str) -> None:
    base, key = embedded
    run = run_asking_for_the_key(workshop, base, key)
    assert run.stdin_requests == [{"prompt": "Your API key (sk-acs-...): ", "password": True}]
    assert run.report["model"] == "smollm2-135m" and len(run.report["steered"]) == 3
    assert not any(key in text for text in run.outputs)


# Last in the module: it kills the app's one replica, and waits for Serve's new one.
def test_a_sigkill_of_the_one_replica_releases_the_hold_and_leaves_no_engine_behind(
        platform: Platform, embedded: tuple[str, str]) -> None:
    import signal
    import threading
    import uuid

    from sqlmodel import select

    from ledger.tokens.tables import Hold

    def replica() -> psutil.Process | None:
        found = platform.replicas()
        assert len(found) <= 1, found
        return found[0] if found else None

    def holds(request_id: str) -> list[Any]:
        async def read(session: Any) -> list[Any]:
            return list((await session.exec(select(Hold).where(Hold.request_id == request_id))).all())
        return platform.read_ledger(read)

    base, key = embedded
    killed = replica()
    assert killed is not None
    # vLLM's EngineCore, and multiprocessing's resource tracker beside it.
    children = killed.children(recursive=True)
    assert platform.engine_cores(killed), [(child, child.cmdline()) for child in children]
    request_id = f"req_{uuid.uuid4().hex}"
    answers: list[Any] = []

    def long_request() -> None:
        try:
            answers.append(httpx.post(f"{base}/completions", timeout=300, json={
                "model": "llama-8b", "prompt": PROMPT, "max_tokens": 1800, "temperature": 0},
                headers={"Authorization": f"Bearer {key}", "X-Request-Id": request_id}))
        except httpx.HTTPError as error:
            answers.append(error)

    client = threading.Thread(target=long_request)
    client.start()
    wait_for(lambda: holds(request_id), 60)
    killed.send_signal(signal.SIGKILL)
    client.join(120)
    assert answers and not (isinstance(answers[0], httpx.Response) and answers[0].status_code == 200), answers
    _, alive = psutil.wait_procs(children, timeout=30)
    assert not alive, f"outlived the killed replica: {alive}"
    # The Hold of the cut request costs nothing, once its lease lapsed; Serve's new replica serves.
    (hold,) = wait_for(lambda: [h for h in holds(request_id) if h.state.value != "held"], 180)
    assert (hold.state.value, hold.used) == ("released", 0)
    wait_for(lambda: (replica() or killed).pid != killed.pid, 180)

    def answered() -> httpx.Response | None:
        try:
            return httpx.post(f"{base}/completions", timeout=120, headers={"Authorization": f"Bearer {key}"},
                              json={"model": "llama-8b", "prompt": PROMPT, "max_tokens": 2})
        except httpx.TransportError:  # the new replica's server is not up yet
            return None

    # The new replica listens on the same port: the port's requests reach it once its engine is up.
    assert wait_for(answered, 240).json()["usage"]["completion_tokens"] == 2
