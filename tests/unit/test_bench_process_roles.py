"""The bench's CPU line names each process of either server by its role."""
import subprocess
import sys
import time

import pytest

from bench import process_cpu
from bench.process_cpu import role_of


@pytest.mark.parametrize(("command", "role"), [
    ("VLLM::EngineCore", "engine core"),
    # vLLM's "mp" executor: the model runs in a worker process apart from the scheduler.
    ("VLLM::Worker", "engine worker"),
    ("ray::ServeReplica:acs:model-smollm2-135m", "model replica"),
    ("ray::ServeReplica:acs:ingress", "ingress"),
    ("python -m vllm.entrypoints.openai.api_server --model m", "vllm api server"),
    ("/usr/bin/something-else", "other"),
])
def test_each_process_gets_its_role(command: str, role: str) -> None:
    assert role_of(command) == role


@pytest.mark.parametrize("blank_read", [0, 1], ids=["at-the-start", "at-the-end"])
def test_a_role_read_once_still_counts_its_cpu_and_its_threads(monkeypatch: pytest.MonkeyPatch,
                                                               blank_read: int) -> None:
    """A command line that reads empty once (a process renaming itself, a read that failed) must
    not move an engine's CPU to "other" or drop its threads from the line."""
    child = subprocess.Popen([sys.executable, "-c", "while True: pass", "VLLM::EngineCore"])  # killed below
    real = process_cpu.command_line
    # Popen returns once the exec began, a moment before the kernel sets the new command line: a
    # read then is a second blank one, which this test does not ask about.
    deadline = time.monotonic() + 5
    while "VLLM::EngineCore" not in real(child.pid) and time.monotonic() < deadline:
        time.sleep(0.001)
    reads: list[int] = []

    def once_blank(pid: int) -> str:
        reads.append(pid)
        return "" if len(reads) - 1 == blank_read else real(pid)

    monkeypatch.setattr(process_cpu, "command_line", once_blank)
    try:
        cpu = process_cpu.ProcessCpu(lambda: [child.pid])
        cpu.start()
        time.sleep(1.0)
        measured = cpu.stop()
    finally:
        child.kill()
        child.wait()
    assert list(measured["core_s"]) == ["engine core"]
    assert measured["core_s"]["engine core"] > 0.3
    assert len(measured["engine_threads_cores"]) == 1
