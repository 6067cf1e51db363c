"""Differential fuzz of the compiled kernel: see lazyconv/benchmarks/fuzz_kernel.py."""

import sys
from pathlib import Path

# Fuzz the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lazyconv.benchmarks.fuzz_kernel import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
