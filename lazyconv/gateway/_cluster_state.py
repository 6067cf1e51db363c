"""Whether the upstream cluster (and each of its brokers) answers, said once per change.

During an outage every client request fails the same way: logging each failure buried the one
line that mattered (a 12 s outage under two clients printed 1,445 copies of one warning), and
nothing was logged when the cluster came back. :class:`ClusterState` logs the change instead:
one line when the cluster stops answering (with the first error), one when it answers again
(how long it was away, how many failures were not logged meanwhile); the same per broker for a
broker that fails while the cluster still answers. Repeats go to the debug level.

It is also the gateway's readiness: the cluster is *fresh* when its last answer is younger than
the metadata's max age. The gateway asks for it in the background (:meth:`UpstreamCluster.watch
<lazyconv.gateway._upstream.UpstreamCluster.watch>`) so that an idle gateway knows too.
"""

from __future__ import annotations

import logging
import time

from lazyconv.net._repeats import REPEAT_INTERVAL_S, RepeatedLines

log = logging.getLogger(__name__)

__all__ = ["ClusterState", "REPEAT_INTERVAL_S"]

class ClusterState:
    """The upstream cluster's reachability (see the module docstring); ``max_age`` in seconds."""

    def __init__(self, max_age: float) -> None:
        self.max_age = max_age
        self.reachable: bool | None = None  # None: not asked yet
        self.last_ok = 0.0  # time.monotonic() of the last answer
        self.lost_at = 0.0
        self.failures = 0  # failed attempts since it was lost (the first one logged)
        self.outages = 0
        self._down_brokers: dict[int, int] = {}  # node id -> failures since it went down
        self._warned = RepeatedLines()

    def ok(self) -> None:
        """The cluster answered."""
        now = time.monotonic()
        self.last_ok = now
        if self.reachable is False:
            log.warning("upstream cluster reachable again after %.1f s (%d more failed "
                        "attempts while it was not)", now - self.lost_at, self.failures - 1)
        self.reachable = True
        self.failures = 0

    def failed(self, what: str, error: object) -> None:
        """``what`` (e.g. "metadata refresh") found no cluster to answer it."""
        self.failures += 1
        if self.reachable is None:  # never reached: the caller (the gateway's start) says so
            self.reachable = False
            self.lost_at = time.monotonic()
            log.debug("upstream cluster not reached (%s): %s", what, error)
        elif self.reachable:
            self.reachable = False
            self.lost_at = time.monotonic()
            self.outages += 1
            log.error("upstream cluster unreachable (%s): %s; the gateway answers its clients "
                      "with retriable errors until it is back (repeats are not logged)", what, error)
        else:
            log.debug("upstream cluster still unreachable (%s): %s", what, error)

    def broker_failed(self, node: int, what: str, error: object) -> None:
        """A request to broker ``node`` failed (the cluster may still answer)."""
        failures = self._down_brokers.get(node)
        if failures is None:
            self._down_brokers[node] = 1
            log.warning("upstream broker %d failed (%s): %s; its partitions are answered with "
                        "NOT_LEADER_FOR_PARTITION until it or a new leader answers (repeats "
                        "are not logged)", node, what, error)
        else:
            self._down_brokers[node] = failures + 1
            log.debug("upstream broker %d still failing (%s): %s", node, what, error)

    def broker_ok(self, node: int | None) -> None:
        """A connection to broker ``node`` opened."""
        if node is None:
            return
        failures = self._down_brokers.pop(node, None)
        if failures is not None:
            log.warning("upstream broker %d answers again (%d more failures while it did not)",
                        node, failures - 1)

    def warn(self, what: str, error: object) -> None:
        """A failure of ``what`` (e.g. "JoinGroup for a group") that every client request may
        meet again: logged the first time, then at most once per ``REPEAT_INTERVAL_S`` with
        the number of repeats since (the rest at the debug level)."""
        self._warned.log(log, logging.WARNING, what, "%s failed: %s", what, error)

    @property
    def metadata_age(self) -> float | None:
        """Seconds since the cluster last answered (``None``: never)."""
        return time.monotonic() - self.last_ok if self.last_ok else None

    @property
    def fresh(self) -> bool:
        """The cluster answered last time and within ``max_age``."""
        age = self.metadata_age
        return bool(self.reachable) and age is not None and age < self.max_age
