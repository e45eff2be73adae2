"""Benchmarks (``make bench``): every figure is a ratio or a size measured in one run."""
