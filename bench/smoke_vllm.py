"""Smoke test of vLLM (CPU) on the local model folders.

    python bench/smoke_vllm.py [--eager] [tiny-llama smollm2-135m]

Each model runs in a fresh subprocess (one engine per process), greedy from
"The sky is" with logprobs, and prints one JSON line: start-up seconds,
prompt token ids, generated text and top logprobs. Build the folders first
with `python -m cluster.build_models`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PROMPT = "The sky is"
TINY_SKY_IDS = [128000, 791, 13180, 374]

ENGINE_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_OMP_THREADS_BIND": "0-1",
    "HF_HUB_OFFLINE": "1",
    "VLLM_CACHE_ROOT": str(REPO_ROOT / ".vllm_cache"),
    # TMPDIR is a throwaway folder per run; keep compiled kernels across runs.
    "TORCHINDUCTOR_CACHE_DIR": str(REPO_ROOT / ".vllm_cache" / "inductor"),
}


def run_one(model_id: str, eager: bool) -> dict:
    """In the child process: start the engine, generate, report."""
    sys.path.insert(0, str(REPO_ROOT))
    from deployments.catalog import load_model_spec

    spec = load_model_spec(model_id)
    start = time.monotonic()
    from vllm import LLM, SamplingParams

    imported = time.monotonic()
    llm = LLM(
        model=spec.weights_path(),
        tokenizer=spec.tokenizer_path(),
        served_model_name=spec.served_model_name,
        dtype="float32",
        max_model_len=2048,
        distributed_executor_backend="uni",
        enforce_eager=eager,
        seed=0,
    )
    ready = time.monotonic()
    params = SamplingParams(temperature=0.0, max_tokens=8, logprobs=3, prompt_logprobs=1)
    out = llm.generate([PROMPT], params)[0]
    done = time.monotonic()
    llm.generate([PROMPT], params)  # the first request pays for warm-up
    again = time.monotonic()
    completion = out.outputs[0]
    result = {
        "model": model_id,
        "eager": eager,
        "import_s": round(imported - start, 1),
        "engine_start_s": round(ready - imported, 1),
        "first_generate_s": round(done - ready, 2),
        "second_generate_s": round(again - done, 2),
        "prompt_token_ids": list(out.prompt_token_ids),
        "text": completion.text,
        "token_ids": list(completion.token_ids),
        "first_top_logprobs": {
            str(tid): round(lp.logprob, 4) for tid, lp in (completion.logprobs or [{}])[0].items()
        },
        "finish_reason": completion.finish_reason,
    }
    if model_id == "tiny-llama":
        result["tiny_prompt_ids_ok"] = result["prompt_token_ids"] == TINY_SKY_IDS
    return result


def spawn(model_id: str, eager: bool) -> dict:
    """Run one model in a child process with the engine's environment."""
    rpc_dir = tempfile.mkdtemp(prefix="acs-vllm-rpc-")
    # vLLM puts ipc sockets and its file store in the temp dir: keep them in ours.
    env = {**os.environ, **ENGINE_ENV, "VLLM_RPC_BASE_PATH": rpc_dir, "TMPDIR": rpc_dir}
    cmd = [sys.executable, __file__, "--child", model_id] + (["--eager"] if eager else [])
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    finally:
        shutil.rmtree(rpc_dir, ignore_errors=True)  # ipc sockets vLLM may leave
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"model": model_id, "error": proc.returncode, "stderr": proc.stderr[-3000:]}
    return json.loads(lines[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["tiny-llama", "smollm2-135m"])
    parser.add_argument("--eager", action="store_true", help="enforce_eager=True")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child, args.eager)), flush=True)
        return 0
    failed = False
    for model_id in args.models:
        result = spawn(model_id, args.eager)
        print(json.dumps(result), flush=True)
        failed |= "error" in result or result.get("tiny_prompt_ids_ok") is False
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
