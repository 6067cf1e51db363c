"""``python -m lazyconv``: the same as the ``lazyconv`` command."""

import sys

from lazyconv._cli import main

if __name__ == "__main__":
    sys.exit(main())
