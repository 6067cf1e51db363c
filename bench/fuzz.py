"""Mutation fuzzing of lazyconv's decoders, conversions, lazy send, Produce validation and the
broker's request handler, with a time budget (see lazyconv/benchmarks/fuzz.py).

Usage::

    python bench/fuzz.py --budget 600                      # all targets, 10 minutes
    python bench/fuzz.py --budget 60 --targets records,broker
    python bench/fuzz.py --budget 120 --save-corpus tests/fuzz_corpus
    python bench/fuzz.py --replay tests/fuzz_corpus        # the regression corpus only
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lazyconv.benchmarks.fuzz import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
