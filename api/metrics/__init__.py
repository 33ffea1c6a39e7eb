"""Metrics for Prometheus at GET /metrics (`api.metrics.router`), and what Ray Serve counts instead.

Ours (`acs_*`), counted as requests come and go (`series`, into the process's `counts.Counts`,
by `middleware` and each Settlement):
- `acs_requests_total{method,route,status,model}`: HTTP answers by route template (never the raw
  path), status and served model ("" where the route names none);
- `acs_request_duration_seconds` (to the last byte: a stream's whole life) and
  `acs_request_first_byte_seconds` (to the status line: for a stream, when Inference started its
  answer), histograms with the same labels;
- `acs_tokens_total{model,source,direction}`: tokens charged where a Hold settles: Completions on
  the ingress, Jobs' and Loom Nodes' Completions and harvests on the Runner.

These are one count per cluster. With ACS_REDIS_URL (the cluster: several ingress replicas and
the Runner replica) every process adds its counts to Redis (`tally_redis`: a buffer flushed every
ACS_METRICS_FLUSH_S, and by the replica that answers a scrape, so a request never waits on
Redis), and any replica's /metrics reads the totals there: every scrape shows the same series,
the Runner's tokens included. Counts that Redis did not take are counted in
`acs_metrics_lost_total{series}`, and `acs_cluster_counts_read_ok` is 0 (the totals left out)
when a scrape could not read them. Without Redis (the embedded default) the process's own
registry is the count (`tally.ProcessTally`); the embedded Runner is a Serve replica of its own,
so there the tokens of background work do not reach /metrics.

Ours, read at each scrape (`scrape`), so nothing is counted twice:
- from the replica that answers the scrape, labelled with its name (`replica`: Serve's replica id,
  the label of Serve's own series): `acs_in_flight` and `acs_in_flight_limit` per model (its
  gateways), `acs_breaker_state` (0 closed, 1 half-open, 2 open) and `acs_breaker_failures` per
  model, `acs_line_requests{state}` and `acs_line_longest{state}` (its requests in the per-key
  lines: waiting, running). With several ingress replicas each scrape shows one of them;
- from the ledger (`ledger.tokens.gauges`, read at most every ACS_METRICS_LEDGER_CACHE_S, the same on
  every replica): `acs_holds_running{model,source}`, `acs_work{kind,status}`,
  `acs_harvest_prompts{model}` and `acs_harvest_prompts_done{model}` (running harvests),
  `acs_gpu_spend_usd_24h`, `acs_spend_stop_locked`, and `acs_ledger_read_ok` (0: the ledger
  did not answer this scrape, and its series are left out rather than shown stale).

Ray Serve's own (`ray_serve_*`), exported on Ray's metrics port of each node, not here; we
count none of it again and the dashboard (cluster/grafana-dashboard.json) takes it from there:
- replicas: `ray_serve_deployment_replica_healthy`, `ray_serve_autoscaling_target_replicas`;
- each model deployment's calls, errors and time: `ray_serve_deployment_request_counter_total`,
  `ray_serve_deployment_error_counter_total`, `ray_serve_deployment_processing_latency_ms`;
- their queues: `ray_serve_deployment_queued_queries`, `ray_serve_replica_processing_queries`;
- the proxy: `ray_serve_num_ongoing_http_requests`. Serve's proxy also counts HTTP requests by
  route and status (`ray_serve_num_http_requests_total`, `ray_serve_http_request_latency_ms`)
  but knows no model; the dashboard's request panels read ours alone, so no request is drawn twice.
"""
