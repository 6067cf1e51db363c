"""A partition's records wrapped so the broker learns what their send did, wherever the send
runs: in the serving process (:mod:`lazyconv.serve._fetch_handler`) or in a sender process
(:mod:`lazyconv.serve._remote_fetch`, whose counts the serving process then adds to its own)."""

from __future__ import annotations

import abc
import logging
from typing import Any

from lazyconv._send import Send
from lazyconv.serve._model import BrokerStats

log = logging.getLogger("lazyconv.serve._fetch_handler")

__all__ = ["TrackedRecords", "TrackedFileRecords", "TrackedLazyRecords", "report_corrupt_send",
           "SEND_COUNTS", "send_counts", "add_send_counts"]


class TrackedRecords(abc.ABC):
    """Wraps a partition's records so the broker learns what their send did.

    The send is accounted for by :meth:`close`, once the response is finished (or abandoned).
    """

    def __init__(self, records: Any, stats: BrokerStats) -> None:
        self.records = records
        self._stats = stats
        self._send: Any = None

    @property
    def size_in_bytes(self) -> int:
        return self.records.size_in_bytes

    def to_send(self) -> Send:
        self._send = self.records.to_send()
        return self._send

    def close(self) -> None:
        send, self._send = self._send, None
        if send is not None:
            self._account(send)

    @abc.abstractmethod
    def _account(self, send: Any) -> None:
        """Add what ``send`` did to the broker's stats."""


class TrackedFileRecords(TrackedRecords):
    """A file slice sent unconverted: how much went out zero-copy; closes the slice."""

    def _account(self, send: Any) -> None:
        self._stats.zero_copy_bytes += getattr(send, "zero_copy_bytes", 0)

    def close(self) -> None:
        super().close()
        self.records.close()


class TrackedLazyRecords(TrackedRecords):
    """Lazily converted records: padding, chunks and records converted by their send."""

    def _account(self, send: Any) -> None:
        self._stats.padded_bytes += getattr(send, "padding_bytes", 0)
        self._stats.converted_chunks += getattr(send, "chunks", 0)
        stats = getattr(send, "stats", None)
        if stats is not None:
            self._stats.records_converted += stats.records_converted
        self._stats.conversions_reused += getattr(self.records, "reused_conversions", 0)


def report_corrupt_send(stats: BrokerStats, where: str, error: object) -> None:
    """A lazy send met corrupt data after its size was committed: the records converted before
    it went out, the rest is padding, and the other partitions of the response arrive."""
    stats.corrupt_sends += 1
    log.error("fetch %s: corrupt log data met while sending; the rest of the partition is "
              "padding: %s", where, error)


# The counters of a BrokerStats that the sends above add to.
SEND_COUNTS = ("zero_copy_bytes", "padded_bytes", "converted_chunks", "records_converted",
               "conversions_reused")


def send_counts(stats: BrokerStats) -> tuple[int, ...]:
    """The :data:`SEND_COUNTS` of ``stats``, in order (what a sender reports)."""
    return tuple(getattr(stats, name) for name in SEND_COUNTS)


def add_send_counts(stats: BrokerStats, counts: tuple[int, ...]) -> None:
    """Add what the sends counted in ``counts`` (a sender's :func:`send_counts`) to ``stats``."""
    for name, count in zip(SEND_COUNTS, counts, strict=True):
        setattr(stats, name, getattr(stats, name) + count)
