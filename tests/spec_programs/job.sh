#!/bin/sh
set -eu
KEY=${1:-sky-$(date +%s)}
job=$(curl -sS "$ACS_API_BASE/completion-jobs" \
-H "Authorization: Bearer $ACS_API_KEY" \
-H "Content-Type: application/json" \
-H "Idempotency-Key: $KEY" \
-d '{"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2}')
JOB_ID=$(echo "$job" | jq -r .id)
echo "Submitted job $JOB_ID with Idempotency-Key $KEY" >&2
status=queued
while [ "$status" = queued ] || [ "$status" = running ]; do
sleep 1
status=$(curl -sS "$ACS_API_BASE/completion-jobs/$JOB_ID" \
-H "Authorization: Bearer $ACS_API_KEY" | jq -r .status)
done
echo "Job $JOB_ID is $status" >&2
curl -sS --fail-with-body "$ACS_API_BASE/completion-jobs/$JOB_ID/result" \
-H "Authorization: Bearer $ACS_API_KEY"
