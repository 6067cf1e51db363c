"""Run the 'chunk_sizes' benchmark: see lazyconv/benchmarks/chunk_sizes.py (or 'lazyconv bench chunk-sizes --help')."""

import sys

from lazyconv.benchmarks.chunk_sizes import main

if __name__ == "__main__":
    sys.exit(main())
