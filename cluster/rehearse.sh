#!/usr/bin/env bash
# The cluster rehearsal: the GPU cluster's shape on this one machine, with CPU models.
#
#   bash cluster/rehearse.sh            # set up, start, print the admin key; returns once it serves
#   bash cluster/rehearse.sh status     # each node's raylet, the replicas and where they run
#   bash cluster/rehearse.sh processes  # the same as JSON (for bench/chaos.py)
#   bash cluster/rehearse.sh down       # stop every process of the rehearsal, and only those
#
# It makes (or reuses) the PostgreSQL database acs_rehearsal on 127.0.0.1:5432 and migrates it, empties
# Redis db 7 on 127.0.0.1:6379, then starts three Ray nodes as `ray up cluster/ray-aws.yaml` lays them
# out: `ray start --head` (resource `api`, GCS on port 6380: Redis has 6379, dashboard on 127.0.0.1:8265)
# and two `ray start --address` workers, one with the `models` resource (the "GPU" node of the model
# replicas) and one with `harvest` (the harvest model hosts). Then `serve deploy` of
# cluster/serve-rehearsal.yaml (profile configs/profiles/cluster.yaml: tiny-llama and SmolLM2-135M,
# each autoscaling from zero), and it waits for GET /health. The API answers on
# http://127.0.0.1:8000/v1 with the key it prints (the admin user `local`, as the embedded default's).
#
# How it differs from a real cluster:
#   - one machine: the three nodes share the address 127.0.0.1, its CPUs and its memory, and each
#     node has ports of its own (cluster/rehearsal.py lists them) where a real node takes Ray's defaults;
#   - Serve's proxy runs on the head alone (proxy_location: HeadOnly): three proxies cannot bind one
#     port on one address; a real cluster has one per node behind its load balancer;
#   - the "GPU" worker runs the models on its CPU, and the models are the test suite's tiny ones;
#   - PostgreSQL and Redis are the machine's, on loopback without TLS or passwords; harvest files go to
#     var/rehearsal/harvests; the API is plain http on loopback; the secrets are made here
#     (var/rehearsal/secrets.json, 0600) instead of ~/acs.env.
#
# Settings (environment): ACS_REHEARSAL_HTTP_PORT (8000), ACS_REHEARSAL_RAY_PORT (6380),
# ACS_REHEARSAL_DASHBOARD_PORT (8265), ACS_REHEARSAL_PORT_BASE (26400: each node's Ray ports),
# ACS_REHEARSAL_DATABASE (acs_rehearsal), ACS_REHEARSAL_REDIS_DB (7), ACS_REHEARSAL_STATE_DIR
# (var/rehearsal). ACS_REHEARSAL_SKIP_SETUP=1 skips cluster/setup.sh (the venv and the model folders).
set -euo pipefail
cd "$(dirname "$0")/.."

command=${1:-up}
if [ "$command" = up ] && [ -z "${ACS_REHEARSAL_SKIP_SETUP:-}" ]; then
  bash cluster/setup.sh   # idempotent: the venv, and the model folders if they are missing
fi
. .venv/bin/activate
exec python -m cluster.rehearsal "$@"
