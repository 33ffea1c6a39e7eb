#!/usr/bin/env bash
# Set up, then run the platform on its embedded default (SmolLM2-135M, SQLite,
# a local Ray instance) on 127.0.0.1:8000. Ctrl-C or SIGTERM stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash cluster/setup.sh
. .venv/bin/activate
exec python -m cluster.embedded "$@"
