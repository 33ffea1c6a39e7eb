"""Background work: the Runner's queues, Looms and their Nodes, harvests, and Idempotency-Key records."""
