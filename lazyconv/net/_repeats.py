"""A log line that every client request may repeat, said without flooding the log.

During an outage, or while a client retries what is refused, the same line would be logged once
per request (a 12 s outage under two clients printed 1,445 copies of one warning).
:class:`RepeatedLines` logs each kind of line the first time, then at most once per
:data:`REPEAT_INTERVAL_S` with the number of repeats since; the repeats in between go to the
debug level. The gateway's cluster state and the connection loop share it.
"""

from __future__ import annotations

import logging
import time

__all__ = ["REPEAT_INTERVAL_S", "RepeatedLines"]

# A line that repeats is logged once, then at most once per this many seconds with the count.
REPEAT_INTERVAL_S = 60.0


class RepeatedLines:
    """When each kind of line (a key) was last logged at its level, and its repeats since."""

    def __init__(self, interval: float = REPEAT_INTERVAL_S) -> None:
        self.interval = interval
        self._said: dict[str, tuple[float, int]] = {}  # key -> (logged at, repeats since)

    def log(self, logger: logging.Logger, level: int, key: str, message: str, *args: object) -> None:
        """``message % args`` at ``level`` if ``key`` was not logged there in the last
        ``interval`` seconds (with `` (N more since the last such line)`` after it when there
        were repeats), else at the debug level."""
        now = time.monotonic()
        logged_at, repeats = self._said.get(key, (None, 0))
        if logged_at is None or now - logged_at >= self.interval:
            self._said[key] = (now, 0)
            if repeats:
                message += f" ({repeats} more since the last such line)"
            logger.log(level, message, *args, stacklevel=2)
        else:
            self._said[key] = (logged_at, repeats + 1)
            logger.debug(message, *args, stacklevel=2)
