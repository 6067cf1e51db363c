"""Run the 'memory' benchmark: see lazyconv/benchmarks/memory.py (or 'lazyconv bench memory --help')."""

import sys
from pathlib import Path

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lazyconv.benchmarks.memory import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
