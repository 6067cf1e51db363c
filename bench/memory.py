"""Run the 'memory' benchmark: see lazyconv/benchmarks/memory.py (or 'lazyconv bench memory --help')."""

import sys

from lazyconv.benchmarks.memory import main

if __name__ == "__main__":
    sys.exit(main())
