"""One exception tree for everything lazyconv refuses.

Every error raised on bad input is a :class:`LazyconvError`. Errors about bytes carry the byte
``position`` where the problem was found (relative to the start of the records being read, or of
the file for file-backed records), so a message always says *what* and *where*.

Hierarchy::

    LazyconvError
    ├── RecordsError                      problems with record bytes
    │   ├── CorruptRecordError            bad CRC, size field out of range, bad magic
    │   ├── InvalidRecordError            structure: counts, varints, lengths, premature end
    │   │   ├── MalformedVarintError      overlong or truncated varint / varlong
    │   │   └── InvalidTimestampError     a timestamp Kafka refuses (up-conversion of old producers' data)
    │   ├── TruncatedDataError            data ends inside a structure that must be complete
    │   ├── UnknownMagicError             magic byte not in 0..2
    │   └── CompressionError              codec problems
    │       ├── UnknownCompressionError       codec id 5..7
    │       ├── UnsupportedCompressionError   codec not representable in the target magic
    │       ├── DecompressionError            a codec stream that does not decode
    │       └── DecompressionBombError        decompressed data past the configured bound
    ├── ProtocolError                     Kafka wire-protocol problems, either side:
    │   ├── RemoteProtocolError               bytes from the peer that do not decode (its fault)
    │   └── LocalProtocolError                a message we were asked to build is invalid (ours)
    ├── ConfigurationError                bad arguments (e.g. a chunk size out of range)
    ├── ValidationError                   a log directory that fails validation (CLI / Spark)
    ├── StorageError                      the log directory cannot be written (disk full, I/O error)
    └── UpstreamError                     the gateway's Kafka cluster unreachable or unusable
"""

from __future__ import annotations

__all__ = [
    "LazyconvError",
    "RecordsError",
    "CorruptRecordError",
    "InvalidRecordError",
    "MalformedVarintError",
    "InvalidTimestampError",
    "TruncatedDataError",
    "UnknownMagicError",
    "CompressionError",
    "UnknownCompressionError",
    "UnsupportedCompressionError",
    "DecompressionError",
    "DecompressionBombError",
    "ProtocolError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "ConfigurationError",
    "ValidationError",
    "StorageError",
    "UpstreamError",
]


class LazyconvError(Exception):
    """Base class of every error lazyconv raises on bad input or bad arguments.

    ``position`` is the byte position the problem was found at, or ``None`` when the error is not
    about a place in a byte stream. It is appended to the message as ``(at byte N)``.
    """

    def __init__(self, message: str, position: int | None = None) -> None:
        self.message = message
        self.position = position
        if position is not None:
            message = f"{message} (at byte {position})"
        super().__init__(message)

    def __reduce__(self) -> tuple[type[LazyconvError], tuple[str, int | None]]:  # keep pickling (multiprocessing, Spark) faithful
        return (type(self), (self.message, self.position))


class RecordsError(LazyconvError):
    """Record bytes that cannot be read as Kafka records."""


class CorruptRecordError(RecordsError):
    """Checksum mismatch, a size field out of range, or other corruption (Kafka's CorruptRecordException)."""


class InvalidRecordError(RecordsError):
    """Records whose structure is wrong (Kafka's InvalidRecordException)."""


class MalformedVarintError(InvalidRecordError):
    """A varint or varlong that is overlong or runs past the end of its data."""


class InvalidTimestampError(InvalidRecordError):
    """A record timestamp Kafka refuses (Kafka's InvalidTimestampException, error INVALID_TIMESTAMP)."""


class TruncatedDataError(RecordsError):
    """Data that ends inside a structure that must be complete (not a trailing partial batch)."""


class UnknownMagicError(CorruptRecordError):
    """A magic byte other than 0, 1 or 2."""


class CompressionError(RecordsError):
    """Problems with a compression codec or a compressed stream."""


class UnknownCompressionError(CompressionError):
    """A codec id that Kafka does not define (5, 6, 7)."""


class UnsupportedCompressionError(CompressionError):
    """A codec the requested magic cannot carry (zstd below magic 2)."""


class DecompressionError(CompressionError):
    """A compressed stream that does not decode."""


class DecompressionBombError(CompressionError):
    """Decompressed data larger than the configured bound."""


class ProtocolError(LazyconvError):
    """Kafka wire-protocol data that cannot be decoded or encoded (catch this for either side)."""


class RemoteProtocolError(ProtocolError):
    """The peer broke the protocol: bytes it sent do not decode (truncated, a length past the
    end, invalid UTF-8, an API or version that is not served). A server answers by closing
    that connection, as a Kafka broker does; the peer is to blame (h11's distinction)."""


class LocalProtocolError(ProtocolError):
    """We would break the protocol: a message we were asked to encode is invalid (a null in a
    non-nullable field, a value out of range, a version the message does not have). This is a
    bug in the caller (or in lazyconv), never the peer's fault."""


class ConfigurationError(LazyconvError, ValueError):
    """An argument outside its allowed range (also a ``ValueError``)."""


class ValidationError(LazyconvError):
    """A log directory or segment that fails validation."""


class StorageError(LazyconvError):
    """The log directory could not be written or synced (disk full, I/O error, a file that
    cannot be created): Kafka's KafkaStorageException. Whatever the failed write left behind
    has been rolled back, so the next write may succeed once the cause is gone."""


class UpstreamError(LazyconvError):
    """The Kafka cluster behind the gateway could not be reached, or answered something the
    gateway cannot use (no common API version above Kafka 4.0's floor, a malformed response)."""
