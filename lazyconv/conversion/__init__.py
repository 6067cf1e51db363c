"""Conversion between Kafka's record formats, both directions, and KIP-283's lazy send.

- :mod:`~lazyconv.conversion._down`: :func:`down_convert` (Kafka's ``RecordsUtil``), eager, for
  a consumer of magic 0 or 1; :mod:`~lazyconv.conversion._to_legacy` the batch-level steps it
  and the lazy send share (a v2 batch's records as legacy messages; runs of plain batches in one
  kernel call).
- :mod:`~lazyconv.conversion._chunks`: the chunk plan and the overflow padding;
  :mod:`~lazyconv.conversion._lazy_records`: :class:`LazyDownConvertedRecords` (the committed
  size first); :mod:`~lazyconv.conversion._lazy_send`: its send, one chunk in memory.
- :mod:`~lazyconv.conversion._cache`: the process's cache of recent compressed conversions.
- :mod:`~lazyconv.conversion._up`: :func:`up_convert`, an old producer's message set as one v2
  batch; :mod:`~lazyconv.conversion._entry_checks`: the checks Kafka makes on a producer's
  entries, shared by up-conversion and ``serve``'s append validation.

This layer sits on :mod:`lazyconv.records` and below :mod:`lazyconv.protocol`.
"""

from lazyconv.conversion._cache import ConversionCache, conversion_cache
from lazyconv.conversion._chunks import (
    DEFAULT_CHUNK_SIZE,
    MAX_CHUNK_SIZE,
    MIN_CHUNK_SIZE,
    overflow_padding,
)
from lazyconv.conversion._down import (
    ConversionStats,
    ConvertedRecords,
    down_convert,
    down_convert_file,
)
from lazyconv.conversion._lazy_records import CommittedState, LazyDownConvertedRecords
from lazyconv.conversion._lazy_send import LazyDownConvertSend
from lazyconv.conversion._up import UpConverted, kafka_error_code, up_convert

__all__ = [
    "ConversionCache",
    "conversion_cache",
    "DEFAULT_CHUNK_SIZE",
    "MAX_CHUNK_SIZE",
    "MIN_CHUNK_SIZE",
    "overflow_padding",
    "ConversionStats",
    "ConvertedRecords",
    "down_convert",
    "down_convert_file",
    "CommittedState",
    "LazyDownConvertedRecords",
    "LazyDownConvertSend",
    "UpConverted",
    "kafka_error_code",
    "up_convert",
]
