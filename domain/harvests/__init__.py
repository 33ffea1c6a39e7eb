"""Harvests: the submit's checks, the reads, the cancel, and the Runner's handler of kind `harvest`."""
