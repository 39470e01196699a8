#!/usr/bin/env python3
"""PyTorch peer of zbench's Go benchmarks: the command.

Prints the results of the bench_test workloads run with PyTorch, in Go
benchmark format under the same names, so that one benchstat call compares
zbench with PyTorch. What it runs and how: README.md beside this file; the
code: the torchpeer package, one module per workload.

    /usr/bin/python3 baselines/peers/torch_bench.py > torch.txt
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from torchpeer.cli import main  # noqa: E402
from torchpeer.harness import find_blas  # noqa: E402,F401  (scripts/install-python-ref.sh)

if __name__ == "__main__":
    sys.exit(main())
