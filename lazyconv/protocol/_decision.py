"""What a broker puts in each partition of a FetchResponse (docs/guide/fetch-response.md).

Two helpers, both pure functions of their inputs (no logs, no sockets):

- :class:`FetchBudget` applies KIP-74's limits while the log is read: the response budget
  ``max_bytes``, each partition's ``partition_max_bytes``, and the rule that the first
  partition with data gets at least one whole batch (v3+; v0–2 have a hard limit and may return
  a truncated first batch). Budgets are consumed with pre-conversion sizes.
- :func:`broker_partition_response` turns one read result into the partition dict of the
  response body: the zstd gate (topic ``compression.type=zstd`` and Fetch < v10 → error 76),
  the conversion decision by fetch version and the topic's message format (v0–1 read magic 0,
  v2–3 magic ≤ 1, v4+ magic ≤ 2), ``downconversion_enable`` (off → error 35 for consumers;
  followers are exempt), lazy down-conversion when needed (an unsupported codec in the first
  batch → error 76), and zero-copy pass-through otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from lazyconv.errors import (
    ConfigurationError,
    ErrorCode,
    LocalProtocolError,
    UnsupportedCompressionError,
)
from lazyconv.protocol._fetch import MAX_FETCH_VERSION, MIN_FETCH_VERSION

if TYPE_CHECKING:
    from lazyconv._types import Records, SendableRecords

    ReadResult = Records | bytes | bytearray | memoryview

__all__ = [
    "DEFAULT_BROKER_FETCH_MAX_BYTES",
    "readable_magic",
    "zstd_readable",
    "conversion_target_magic",
    "error_partition",
    "fetch_replica_id",
    "is_follower_fetch",
    "broker_partition_response",
    "FetchBudget",
]

log = logging.getLogger(__name__)

# Broker config fetch.max.bytes default (55 MiB).
DEFAULT_BROKER_FETCH_MAX_BYTES = 57_671_680
_INT32_MAX = 0x7FFFFFFF
_ZSTD_FIRST_FETCH_VERSION = 10


def _check_version(version: int) -> None:
    if not isinstance(version, int) or not MIN_FETCH_VERSION <= version <= MAX_FETCH_VERSION:
        raise LocalProtocolError(f"Fetch version {version!r:.40} is not supported")


def _check_ints(where: str, **values: object) -> None:
    """Raise :class:`ConfigurationError` naming the first of ``values`` that is not an int."""
    for name, value in values.items():
        if not isinstance(value, int):
            raise ConfigurationError(f"{where}: {name} must be an int, got {value!r:.40}")


def _check_error_code(error_code: object) -> None:
    if not isinstance(error_code, int):  # int() took "3" and 2.5 and refused None as a TypeError
        raise LocalProtocolError(f"a partition's error_code must be an int, got {error_code!r:.40}")


def readable_magic(version: int) -> int:
    """The newest record magic a client of this Fetch version can read (0, 1 or 2)."""
    _check_version(version)
    if version <= 1:
        return 0
    if version <= 3:
        return 1
    return 2


def zstd_readable(version: int) -> bool:
    """Whether a client of this Fetch version may receive zstd data (v10+, KIP-110)."""
    return version >= _ZSTD_FIRST_FETCH_VERSION


def conversion_target_magic(version: int, topic_magic: int = 2) -> int | None:
    """The magic the broker converts to, or ``None`` when the records go out unconverted.

    Decided by the topic's configured message format (``topic_magic``), never by the batches.
    """
    _check_version(version)
    if topic_magic not in (0, 1, 2):
        raise ConfigurationError(f"topic message format magic must be 0, 1 or 2, got {topic_magic}")
    if topic_magic > 0 and version <= 1:
        return 0
    if topic_magic > 1 and version <= 3:
        return 1
    return None


def fetch_replica_id(version: int, request: Mapping[str, Any]) -> int:
    """The requesting replica's id in a decoded FetchRequest (−1 for a consumer).

    v0–14 carry it in the body's ``replica_id``; v15+ moved it into the tagged
    ``replica_state`` (the body's ``replica_id`` then decodes as its default, −1).
    """
    _check_version(version)
    if not isinstance(request, Mapping):
        raise ConfigurationError(f"a decoded FetchRequest (a mapping) is needed, got {type(request).__name__}")
    if version >= 15:
        state = request.get("replica_state") or {}
        return int(state.get("replica_id", -1))
    return int(request.get("replica_id", -1))


def is_follower_fetch(version: int, request: Mapping[str, Any]) -> bool:
    """Whether a decoded FetchRequest comes from a follower broker (replica id ≥ 0).

    −1 is a consumer and −2 a debugging consumer; both are consumers for the conversion rules.
    """
    return fetch_replica_id(version, request) >= 0


def error_partition(partition_index: int, error_code: int, *, null_records: bool = False) -> dict[str, Any]:
    """A partition built for an error: HW/LSO/log start −1, null aborted transactions (as
    Kafka's), empty records.

    Kafka itself sends null records (length −1) here, but librdkafka (confluent-kafka, kcat)
    rejects a null records field ("invalid MessageSetSize -1") and drops the rest of the
    response, so lazyconv sends empty records (docs/guide/fetch-response.md). ``null_records=True``
    gives Kafka's exact bytes.
    """
    _check_error_code(error_code)
    return {
        "partition_index": partition_index,
        "error_code": int(error_code),
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": None if null_records else b"",
    }


def _wire_error_code(version: int, error_code: int) -> int:
    # Clients older than Fetch v6 do not know KAFKA_STORAGE_ERROR.
    if error_code == ErrorCode.KAFKA_STORAGE_ERROR and version <= 5:
        return int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    return int(error_code)


def broker_partition_response(
    version: int,
    partition_index: int,
    records: ReadResult | None,
    *,
    fetch_offset: int,
    error_code: int = 0,
    high_watermark: int = -1,
    last_stable_offset: int = -1,
    log_start_offset: int = -1,
    aborted_transactions: Iterable[Mapping[str, int]] | None = (),
    preferred_read_replica: int = -1,
    topic_magic: int = 2,
    topic_compression: str = "producer",
    downconversion_enable: bool = True,
    is_follower: bool = False,
    hosted: bool = True,
    extra_fields: Mapping[str, Any] | None = None,
    lazy_records_factory: Callable[[Records, int, int], SendableRecords] | None = None,
    null_records: bool = False,
) -> dict[str, Any]:
    """The partition entry a broker sends for one read result (docs/guide/fetch-response.md).

    ``records`` is what the log read returned (``None`` for an error read, bytes,
    ``MemoryRecords`` or a ``FileRecords`` slice — typically from :meth:`FetchBudget.read`).
    ``topic_magic`` and ``topic_compression`` (Kafka's ``compression.type`` value: ``"producer"``,
    ``"zstd"``, ``"gzip"``…) are the topic's configuration; ``hosted=False`` means the broker has
    no log (and so no config) for the partition, which is then sent as read.
    ``extra_fields`` (e.g. ``current_leader``, ``diverging_epoch``) are copied into the entry.
    ``lazy_records_factory(records, to_magic, first_offset)`` builds the lazily converted
    records; it defaults to :class:`lazyconv.conversion._lazy_records.LazyDownConvertedRecords`.
    An error read (``records`` None) is sent with empty records, as every error partition is
    (see :func:`error_partition`); ``null_records=True`` keeps Kafka's null.
    """
    _check_version(version)
    _check_error_code(error_code)
    if aborted_transactions is not None and not isinstance(aborted_transactions, Iterable):
        raise LocalProtocolError(f"aborted_transactions must be an iterable of mappings or None, "
                                 f"got {type(aborted_transactions).__name__}")
    if extra_fields is not None and not isinstance(extra_fields, Mapping):
        raise LocalProtocolError(f"extra_fields must be a mapping of field names or None, "
                                 f"got {type(extra_fields).__name__}")
    if hosted:
        if str(topic_compression).lower() == "zstd" and not zstd_readable(version):
            return error_partition(partition_index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                   null_records=null_records)
        target = conversion_target_magic(version, topic_magic)
    else:
        target = None

    entry: dict[str, Any] = {
        "partition_index": partition_index,
        "error_code": _wire_error_code(version, error_code),
        "high_watermark": high_watermark,
        "last_stable_offset": last_stable_offset,
        "log_start_offset": log_start_offset,
        "aborted_transactions": None if aborted_transactions is None else list(aborted_transactions),
        "preferred_read_replica": preferred_read_replica,
        "records": (None if null_records else b"") if records is None else records,
    }
    if extra_fields:
        entry.update(extra_fields)
    if target is None:
        return entry

    if not is_follower and not downconversion_enable:
        return error_partition(partition_index, ErrorCode.UNSUPPORTED_VERSION, null_records=null_records)
    if records is None or _size(records) == 0:
        # Error reads and empty reads are converted as empty records: S_pre = 0, and the
        # records field is empty rather than null (error partitions).
        entry["records"] = b""
        return entry
    if lazy_records_factory is None:
        from lazyconv.conversion._lazy_records import LazyDownConvertedRecords

        def lazy_records_factory(r: Records, to_magic: int, first_offset: int) -> SendableRecords:
            return LazyDownConvertedRecords(r, to_magic, first_offset)

    if isinstance(records, (bytes, bytearray, memoryview)):
        from lazyconv.records import MemoryRecords

        records = MemoryRecords(records)
    try:
        entry["records"] = lazy_records_factory(records, target, fetch_offset)
    except UnsupportedCompressionError as exc:
        log.info("partition %d: first batch cannot be converted to magic %d: %s",
                 partition_index, target, exc)
        return error_partition(partition_index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                               null_records=null_records)
    return entry


def _base_position(records: Records) -> int:
    from lazyconv.records import FileRecords

    return records.start if isinstance(records, FileRecords) else 0


def _size(records: ReadResult) -> int:
    if isinstance(records, (bytes, bytearray, memoryview)):
        return len(records)
    size = records.size_in_bytes
    return size() if callable(size) else size


class FetchBudget:
    """KIP-74 byte limits for one fetch, applied partition by partition in response order.

    ``max_bytes`` is the request's MaxBytes (v3+; ``None`` for v0–2, meaning 2^31−1); the budget
    is ``min(max_bytes, broker_max_bytes, quota_max_bytes)``. Call :meth:`read` for each
    partition in order; it consumes the budget with pre-conversion sizes. A reader that
    already knows where the fetch offset's batch starts (serve's entry index) calls
    :meth:`take` with that batch's size instead.
    """

    def __init__(
        self,
        version: int,
        max_bytes: int | None = None,
        *,
        broker_max_bytes: int = DEFAULT_BROKER_FETCH_MAX_BYTES,
        quota_max_bytes: int | None = None,
    ) -> None:
        _check_version(version)
        _check_ints("FetchBudget", broker_max_bytes=broker_max_bytes,  # the optional two: int or None
                    max_bytes=0 if max_bytes is None else max_bytes,
                    quota_max_bytes=0 if quota_max_bytes is None else quota_max_bytes)
        if version <= 2 or max_bytes is None:
            max_bytes = _INT32_MAX
        limits = [max_bytes, broker_max_bytes]
        if quota_max_bytes is not None:
            limits.append(quota_max_bytes)
        if min(limits) < 0:
            raise ConfigurationError(f"fetch byte limits must be >= 0, got {limits}")
        self.version = version
        self.limit = min(limits)
        self.remaining = self.limit
        self.hard_limit = version <= 2
        self.min_one = not self.hard_limit

    def take(self, first_batch_size: int, available: int, partition_max_bytes: int) -> int:
        """Bytes one partition reads under KIP-74, consuming them from the budget.

        ``first_batch_size`` is the size of the batch holding the fetch offset, ``available``
        the bytes readable from that batch's start (bounded by the high watermark or last
        stable offset). Returns 0 when the partition gets nothing. The first partition with
        data gets at least its first whole batch (v3+); on v0–2 the result may end inside it.
        """
        if not (isinstance(first_batch_size, int) and isinstance(available, int)
                and isinstance(partition_max_bytes, int)):  # per partition: no kwargs unless bad
            _check_ints("FetchBudget.take", first_batch_size=first_batch_size,
                        available=available, partition_max_bytes=partition_max_bytes)
        budget = min(max(partition_max_bytes, 0), self.remaining)
        if self.min_one:
            budget = max(budget, first_batch_size)
        if budget <= 0:
            return 0
        if budget < first_batch_size and not self.hard_limit:
            # v3+: a first batch that does not fit is not returned at all, so consumers can
            # make progress on other partitions.
            return 0
        size = min(available, budget)
        if size > 0:
            self.min_one = False
        self.remaining = max(0, self.remaining - size)
        return size

    def read(self, records: Records, fetch_offset: int, partition_max_bytes: int) -> Records | bytes:
        """The slice of ``records`` this partition gets; empty records are ``b""``.

        ``records`` is the partition's readable log data (``MemoryRecords``/``FileRecords``,
        already bounded by the high watermark or last stable offset). The slice starts at the
        batch holding ``fetch_offset`` and may end inside a batch. The limits are :meth:`take`'s.
        """
        if not hasattr(records, "batches") or not hasattr(records, "slice"):
            raise ConfigurationError(f"FetchBudget.read needs records (MemoryRecords, FileRecords), "
                                     f"got {type(records).__name__}")
        if not (isinstance(fetch_offset, int) and isinstance(partition_max_bytes, int)):
            _check_ints("FetchBudget.read", fetch_offset=fetch_offset,
                        partition_max_bytes=partition_max_bytes)
        first = None
        for batch in records.batches():
            if batch.last_offset >= fetch_offset:
                first = batch
                break
        if first is None:
            return b""
        # Batch positions of file records are file positions; slices are relative to start.
        start = first.position - _base_position(records)
        size = self.take(first.size_in_bytes, _size(records) - start, partition_max_bytes)
        if size <= 0:
            return b""
        return records.slice(start, size)
