"""Moved to :mod:`lazyconv.logdir.recovery`:
these names stay only until their users import them from there."""

import os  # noqa: F401 - tests patch os through this name

from lazyconv.logdir.entry import entry_crc_ok
from lazyconv.logdir.recovery import RecoveryReport, recover_partition

__all__ = ["RecoveryReport", "recover_partition", "entry_crc_ok"]
