#!/usr/bin/env bash
# Issue 14, part 5, in one command on one GPU machine: what the platform adds on top of vLLM's own
# server, with the random-weight Llama at the 8B shape in bfloat16 (configs/models/llama-8b-random.yaml;
# vLLM makes the weights on the GPU, so nothing has to be downloaded or carried there).
#
#   bash bench/gpu.sh [--dry-run] [OUT_DIR]
#
# Needs a node set up by cluster/setup-gpu.sh (vLLM's CUDA build, vllm-lens, Ray). Each run starts
# each side fresh (bench/completions_overhead.py); every run's printout and JSON go to OUT_DIR
# (default bench-gpu-out). --dry-run prints the commands and runs none.
#
# The runs: the issue's workloads (the defaults, concurrency 1, streams at 16 and 1) against
# vLLM's server with the same engine arguments, eager as vllm-lens makes ours; then the defaults and
# concurrency 1 against vLLM's server as it ships (--vllm-stock: no vllm-lens, CUDA graphs): what
# vllm-lens's eager steps cost our plain Completions.
set -euo pipefail
cd "$(dirname "$0")/.."

DRY_RUN=0
OUT_DIR=bench-gpu-out
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu.sh: unknown option $arg (try --help)" >&2; exit 2 ;;
    *) OUT_DIR=$arg ;;
  esac
done

# The colocated ingress asks Ray for the engine's CPU and GPU beside its own: give Ray the machine.
export ACS_NUM_CPUS=${ACS_NUM_CPUS:-$(nproc)}
BENCH=(python bench/completions_overhead.py --profile gpu-bench --model llama-8b-random)

FAILED=()
bench() {
  local name=$1
  shift
  local cmd=("${BENCH[@]}" "$@" --json "$OUT_DIR/$name.json")
  echo "+ ${cmd[*]}"
  # A failed run is noted and the next one goes on: GPU time is scarce, each run stands alone.
  if [ "$DRY_RUN" = 0 ] && ! "${cmd[@]}" 2>&1 | tee "$OUT_DIR/$name.log"; then FAILED+=("$name"); fi
}

if [ "$DRY_RUN" = 0 ]; then
  . .venv/bin/activate
  mkdir -p "$OUT_DIR"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT_DIR/gpu.txt"
  python -c "import vllm, vllm_lens, torch; assert torch.cuda.is_available(), 'no CUDA'; print('vllm', vllm.__version__)"
  python -m cluster.build_models --only llama-8b-random
fi

bench defaults
bench concurrency-1 --concurrency 1 --max-tokens 16 --requests 40
bench stream-16 --stream --concurrency 16 --max-tokens 32 --requests 96
bench stream-1 --stream --concurrency 1 --max-tokens 32 --requests 24
bench defaults-vllm-stock --vllm-stock
bench concurrency-1-vllm-stock --vllm-stock --concurrency 1 --max-tokens 16 --requests 40

if [ "${#FAILED[@]}" -gt 0 ]; then
  echo "gpu.sh: failed: ${FAILED[*]} (their logs are in $OUT_DIR)" >&2
  exit 1
fi
