"""Kafka record codecs: magic v0/v1 messages, magic v2 batches, every compression codec.

Reading: :class:`MemoryRecords` (any bytes-like object) and :class:`FileRecords` (a log segment
read with positioned reads) yield batches lazily (:class:`DefaultBatch` for v2,
:class:`LegacyBatch` for a top-level v0/v1 message); iterating a batch yields :class:`Record`.
Writing: :class:`RecordsBuilder` and :func:`build_end_txn_marker`. Scanning and validating
whole buffers in one pass: :func:`scan_batches`.

The hot path runs in a compiled kernel when it is built (:data:`IMPLEMENTATION` is
``"native"``; ``LAZYCONV_NO_EXTENSIONS=1`` forces the pure-Python reference, ``"python"``);
:data:`CPU_FEATURES` and :func:`implementation_info` say what it uses.
"""

from lazyconv.records._batch import DefaultBatch
from lazyconv.records._builder import RecordsBuilder, build_end_txn_marker, encode_v2_batch
from lazyconv.records._compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression
from lazyconv.records._control import (
    ControlRecordType,
    EndTransactionMarker,
    parse_control_key,
    parse_end_txn_marker,
)
from lazyconv.records._file import FileRecords
from lazyconv.records._impl import CPU_FEATURES, IMPLEMENTATION, implementation_info
from lazyconv.records._legacy import LegacyBatch
from lazyconv.records._memory import MemoryRecords
from lazyconv.records._scan import ScannedEntry, ScanResult, scan_batches
from lazyconv.records._types import Record, RecordBatch, TimestampType

__all__ = [
    "IMPLEMENTATION",
    "CPU_FEATURES",
    "implementation_info",
    "scan_batches",
    "ScanResult",
    "ScannedEntry",
    "Compression",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "TimestampType",
    "Record",
    "RecordBatch",
    "DefaultBatch",
    "LegacyBatch",
    "MemoryRecords",
    "FileRecords",
    "RecordsBuilder",
    "build_end_txn_marker",
    "encode_v2_batch",
    "ControlRecordType",
    "EndTransactionMarker",
    "parse_control_key",
    "parse_end_txn_marker",
]
