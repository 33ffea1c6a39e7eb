"""Metrics for Prometheus at GET /metrics (`api.metrics.router`), and what Ray Serve counts instead.

Ours (`acs_*`), counted as requests come and go (`series`, by `middleware` and the settlement):
- `acs_requests_total{method,route,status,model}`: HTTP answers by route template (never the raw
  path), status and served model ("" where the route names none);
- `acs_request_duration_seconds` (to the last byte: a stream's whole life) and
  `acs_request_first_byte_seconds` (to the status line: for a stream, when Inference started its
  answer), histograms with the same labels;
- `acs_tokens_total{model,source,direction}`: tokens charged where a Completion's Hold settles.

Ours, read at each scrape (`scrape`), so nothing is counted twice:
- from this process: `acs_in_flight` and `acs_in_flight_limit` per model (the gateways),
  `acs_breaker_state` (0 closed, 1 half-open, 2 open) and `acs_breaker_failures` per model,
  `acs_line_requests{state}` and `acs_line_longest{state}` (the per-key lines: waiting, running);
- from the ledger (`ledger.gauges`, read at most every ACS_METRICS_LEDGER_CACHE_S, the same on
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

What one scrape sees: the ingress replica that answers it (the Serve config runs one) and the
ledger. Background work (Jobs, Loom Nodes) runs on the Runner replica: its places at the models
and the tokens it settles are counted in that process, not here; the ledger's series count its
rows, Holds and harvests.
"""
