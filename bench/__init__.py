"""Benchmarks against the sandbox: `make bench` runs them all (bench/run.py)."""
