"""The lazy send into a discarding sink vs aiokafka eager: see lazyconv/benchmarks/lazy_sink.py."""

import sys
from pathlib import Path

# Measure the checkout this script is in (a worktree), not whichever lazyconv is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lazyconv.benchmarks.lazy_sink import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
