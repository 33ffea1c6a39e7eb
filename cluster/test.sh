#!/usr/bin/env bash
# Set up, then run the tests (PostgreSQL on 127.0.0.1:5432, the real vLLM
# engine on the tiny test model, Ray Serve, real HTTP).
set -euo pipefail
cd "$(dirname "$0")/.."
bash cluster/setup.sh
# The browser tests (tests/browser) drive Debian's Chromium; they never download a browser.
if [ -z "${ACS_TEST_CHROMIUM:-}" ] && [ ! -x /usr/bin/chromium ]; then
  . cluster/apt_install.sh
  apt_install chromium
fi
. .venv/bin/activate
# The slowest tests, so that a CI log shows where its time goes (a run should stay under about 45 min).
exec python -m pytest -q --durations=25 "$@"
