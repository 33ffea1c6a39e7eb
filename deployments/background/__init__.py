"""Background work: the Runner and what a kind of work gives it (`kinds.py`)."""
