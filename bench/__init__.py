"""swflows benchmarks: each figure is a ratio against a baseline run alongside."""
