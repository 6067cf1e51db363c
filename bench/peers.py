"""Run the 'peers' benchmark: see lazyconv/benchmarks/peers.py (or 'lazyconv bench peers --help')."""

import sys

from lazyconv.benchmarks.peers import main

if __name__ == "__main__":
    sys.exit(main())
