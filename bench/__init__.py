"""Benchmarks: one module per report in results/, sharing :mod:`bench.harness`."""
