"""Run the 'peers' benchmark: see lazyconv/benchmarks/peers.py (or 'lazyconv bench peers --help')."""

import sys
from pathlib import Path

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lazyconv.benchmarks.peers import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
