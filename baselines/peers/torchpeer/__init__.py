"""The PyTorch peer of zbench's benchmarks, one module per workload (README.md)."""
