"""Size model of an uncompressed magic-v2 batch, as the Java producer estimates it.

The built-in partitioner counts *produced bytes* (record sizes plus the 61-byte batch header each
time a record opens a batch), and whether a batch is "full" decides when a deferred switch may
happen, so both need Kafka's exact sizes (``DefaultRecord.sizeInBytes``,
``DefaultRecordBatch.RECORD_BATCH_OVERHEAD``, ``estimateBatchSizeUpperBound``).
"""

from __future__ import annotations

from collections.abc import Sequence

from lazyconv._buffers import byte_size
from lazyconv.records._format import MAX_RECORD_OVERHEAD, RECORD_BATCH_OVERHEAD

__all__ = [
    "RECORD_BATCH_OVERHEAD",
    "MAX_RECORD_OVERHEAD",
    "varint_size",
    "varlong_size",
    "headers_size",
    "record_size",
    "record_size_upper_bound",
    "batch_size_upper_bound",
]

# RECORD_BATCH_OVERHEAD: bytes of a v2 batch header (DefaultRecordBatch.RECORD_BATCH_OVERHEAD);
# MAX_RECORD_OVERHEAD: worst-case record framing without key/value/headers
# (DefaultRecord.MAX_RECORD_OVERHEAD); both from the wire layout's one source, _format.py.

Headers = Sequence[tuple[str, "bytes | None"]]


def _unsigned_varint_size(z: int) -> int:
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


def varint_size(value: int) -> int:
    """Bytes of ``value`` as a zigzag varint (32-bit)."""
    return _unsigned_varint_size(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def varlong_size(value: int) -> int:
    """Bytes of ``value`` as a zigzag varlong (64-bit)."""
    return _unsigned_varint_size(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def headers_size(headers: Headers) -> int:
    """Bytes of the header section of a record, count varint included."""
    size = varint_size(len(headers))
    for name, value in headers:
        name_bytes = name.encode("utf-8")
        size += varint_size(len(name_bytes)) + len(name_bytes)
        if value is None:
            size += 1
        else:  # bytes-like as records take one (a str's len() counts characters)
            value_size = byte_size(value, "a record's header value")
            size += varint_size(value_size) + value_size
    return size


def _key_value_size(key_size: int, value_size: int) -> int:
    """Bytes of the key and value fields; a size of -1 means null (1-byte length, no data)."""
    size = 1 if key_size < 0 else varint_size(key_size) + key_size
    size += 1 if value_size < 0 else varint_size(value_size) + value_size
    return size


def record_size(
    key_size: int,
    value_size: int,
    headers_bytes: int = 1,
    offset_delta: int = 0,
    timestamp_delta: int = 0,
) -> int:
    """Bytes of one v2 record (``DefaultRecord.sizeInBytes``), length prefix included.

    ``key_size`` / ``value_size`` are -1 for null; ``headers_bytes`` is :func:`headers_size`
    of the headers (1 for none).
    """
    body = (
        1
        + varint_size(offset_delta)
        + varlong_size(timestamp_delta)
        + _key_value_size(key_size, value_size)
        + headers_bytes
    )
    return body + varint_size(body)


def record_size_upper_bound(key_size: int, value_size: int, headers_bytes: int = 1) -> int:
    """``DefaultRecord.recordSizeUpperBound``: 21 + key, value and header fields."""
    return MAX_RECORD_OVERHEAD + _key_value_size(key_size, value_size) + headers_bytes


def batch_size_upper_bound(key_size: int, value_size: int, headers_bytes: int = 1) -> int:
    """``estimateBatchSizeUpperBound``: 61 + the record's upper bound (sizes a new batch's buffer)."""
    return RECORD_BATCH_OVERHEAD + record_size_upper_bound(key_size, value_size, headers_bytes)
