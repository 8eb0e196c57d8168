"""Benchmarks (`make bench`): not tests; they write bench/report.json and bench/report.md."""
