#!/bin/sh
set -eu
harvest=$(curl -sS "$ACS_API_BASE/harvest" \
-H "Authorization: Bearer $ACS_API_KEY" \
-H "Content-Type: application/json" \
-d '{"model": "llama-8b", "prompts": ["The sky is", "Grass is"], "layers": [8, 16, 24]}')
JOB_ID=$(echo "$harvest" | jq -r .job_id)
if [ "$JOB_ID" = null ]; then
  echo "$harvest" >&2
  exit 1
fi
echo "Submitted harvest job $JOB_ID" >&2
status=pending
while [ "$status" = pending ] || [ "$status" = running ]; do
  sleep 3
  read=$(curl -sS "$ACS_API_BASE/harvest/$JOB_ID?wait=60" \
  -H "Authorization: Bearer $ACS_API_KEY")
  status=$(printf '%s' "$read" | jq -r .status)
  [ "$status" != null ] || { printf '%s\n' "$read" >&2; exit 1; }
done
echo "Harvest job $JOB_ID is $status" >&2
[ "$status" = done ] || exit 1
mkdir "harvest-$JOB_ID"
cd "harvest-$JOB_ID"
curl -sS "$ACS_API_BASE/harvest/$JOB_ID" \
-H "Authorization: Bearer $ACS_API_KEY" \
| jq -r '.result | ([["manifest.json", .manifest_url], ["stats.safetensors", .stats_url]] + [.shard_urls | to_entries[] | ["shard_\(("0000" + (.key | tostring))[-5:]).safetensors", .value]])[] | "url = \"\(.[1])\"\noutput = \"\(.[0])\""' \
| curl -sSf --parallel --config -
echo "Downloaded the files into harvest-$JOB_ID" >&2
