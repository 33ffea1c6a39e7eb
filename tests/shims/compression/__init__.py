"""Test-only stand-in for Python 3.14's `compression` package (see zstd.py)."""
