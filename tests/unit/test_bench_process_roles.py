"""The bench's CPU line names each process of either server by its role."""
import pytest

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

