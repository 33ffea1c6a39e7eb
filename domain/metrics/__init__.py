"""What a process counts for /metrics (requests, settled tokens, lines, breakers) and the numbers a
scrape reads from the ledger."""
