"""Run the 'codecs' benchmark: see lazyconv/benchmarks/codecs.py (or 'lazyconv bench codecs --help')."""

import sys

from lazyconv.benchmarks.codecs import main

if __name__ == "__main__":
    sys.exit(main())
