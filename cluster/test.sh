#!/usr/bin/env bash
# Set up, then run the tests (PostgreSQL on 127.0.0.1:5432, the real vLLM
# engine on the tiny test model, Ray Serve, real HTTP).
set -euo pipefail
cd "$(dirname "$0")/.."
bash cluster/setup.sh
. .venv/bin/activate
exec python -m pytest -q "$@"
