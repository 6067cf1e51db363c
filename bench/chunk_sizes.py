"""Run the 'chunk_sizes' benchmark: see lazyconv/benchmarks/chunk_sizes.py (or 'lazyconv bench chunk-sizes --help')."""

import sys
from pathlib import Path

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lazyconv.benchmarks.chunk_sizes import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
