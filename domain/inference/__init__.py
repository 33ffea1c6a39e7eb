"""The platform's side of each model: the gateway (in-flight cap, breaker, waits, failures mapped),
and the clients that reach an engine."""
