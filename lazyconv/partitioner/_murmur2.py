"""Kafka's keyed partitioning: murmur2 exactly as ``org.apache.kafka.common.utils.Utils``.

All arithmetic is modulo 2**32 (Java ``int`` wrap-around); the final-mix shifts are logical. The
result is returned as Java's *signed* 32-bit value. Never use ``abs()`` on it: Kafka maps it to a
non-negative number with :func:`to_positive` (a mask), which differs from ``abs`` for negative
values and is defined for ``-2**31``.
"""

from __future__ import annotations

from lazyconv._buffers import byte_view
from lazyconv.errors import ConfigurationError

__all__ = ["murmur2", "to_positive", "partition_for_key"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Return Kafka's murmur2 hash of ``data`` (any C-contiguous bytes-like buffer, as records
    take one) as a signed 32-bit int (Java's result); anything else raises
    :class:`~lazyconv.errors.ConfigurationError`."""
    data = byte_view(data, "murmur2's data").tobytes()  # bytes(5) would hash five zero bytes, silently
    length = len(data)
    h = (_SEED ^ length) & _MASK
    blocks_end = length - (length % 4)
    for i in range(0, blocks_end, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length % 4
    # The tail cases fall through in Java's switch: one multiply at the end, whatever the tail.
    if tail >= 3:
        h ^= data[blocks_end + 2] << 16
    if tail >= 2:
        h ^= data[blocks_end + 1] << 8
    if tail >= 1:
        h ^= data[blocks_end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(value: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (``value & 0x7fffffff``)."""
    if not isinstance(value, int):
        raise ConfigurationError(f"to_positive takes an int, got {value!r:.40}")
    return value & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """Partition of a keyed record: ``toPositive(murmur2(key)) % num_partitions``.

    ``num_partitions`` is the number of *all* partitions of the topic, leaderless ones included.
    An empty key ``b""`` is a key (it is hashed); only a null key means "no key".
    """
    if not isinstance(num_partitions, int) or num_partitions < 1:
        raise ConfigurationError(f"num_partitions must be an int >= 1, got {num_partitions!r:.40}")
    if key is None:
        raise ConfigurationError("a null key has no key partition; use the built-in partitioner")
    return to_positive(murmur2(key)) % num_partitions
