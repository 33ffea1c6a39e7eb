#!/usr/bin/env bash
# The fuzzing tier with a developer's budget: every route of /openapi.json and every JSON route under
# /account, ACS_FUZZ_EXAMPLES cases each (300 here; CI's `pytest` runs the same tests with 20), against
# the real app over HTTP on a fresh PostgreSQL database (127.0.0.1:5432). A new seed each run; it is
# printed first and last, and ACS_FUZZ_SEED=<seed> bash cluster/fuzz.sh runs those cases again.
# Extra arguments go to pytest, e.g. `bash cluster/fuzz.sh -k account -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
export ACS_FUZZ_EXAMPLES="${ACS_FUZZ_EXAMPLES:-300}"
export ACS_FUZZ_SEED="${ACS_FUZZ_SEED:-$(python -c 'import secrets; print(secrets.randbelow(2**32))')}"
echo "fuzz: seed $ACS_FUZZ_SEED, $ACS_FUZZ_EXAMPLES cases per route (ACS_FUZZ_SEED=$ACS_FUZZ_SEED repeats them)"
status=0
python -m pytest -q -p no:cacheprovider tests/fuzz "$@" || status=$?
echo "fuzz: seed $ACS_FUZZ_SEED"
exit "$status"
