"""Run the 'codecs' benchmark: see lazyconv/benchmarks/codecs.py (or 'lazyconv bench codecs --help')."""

import sys
from pathlib import Path

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lazyconv.benchmarks.codecs import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
