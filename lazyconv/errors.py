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
    ├── UpstreamError                     the gateway's Kafka cluster unreachable or unusable
    │   └── UpstreamAuthenticationError       the cluster refused an upstream connection's credentials
    ├── AuthenticationError               SASL credentials or a certificate refused (never says which part)
    │   └── UpstreamAuthenticationError       (also an UpstreamError)
    └── TlsError                          a TLS connection that cannot be set up or continued
        ├── TlsMismatchError                  one side speaks TLS, the other plaintext
        └── CertificateVerificationError      the peer's certificate does not verify
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

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
    "UnansweredRequestError",
    "UpstreamAuthenticationError",
    "ErrorCode",
    "AuthenticationError",
    "TlsError",
    "TlsMismatchError",
    "CertificateVerificationError",
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

    def __reduce__(self) -> tuple[Any, ...]:  # keep pickling (multiprocessing, Spark) faithful
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
    """An argument outside its allowed range (also a ``ValueError``).

    ``option`` is the command-line option that gave the value refused, where the caller said
    which (``GatewaySettings.load(options=...)``, the command line's own checks); the message
    then begins ``argument OPTION: ``, as argparse words a bad value. None otherwise."""

    option: str | None = None

    def __init__(self, message: str, position: int | None = None, *,
                 option: str | None = None) -> None:
        super().__init__(message, position)
        self.option = option

    def __reduce__(self) -> tuple[Any, ...]:  # the option too
        return (type(self), (self.message, self.position), {"option": self.option})


class ValidationError(LazyconvError):
    """A log directory or segment that fails validation."""


class StorageError(LazyconvError):
    """The log directory could not be written or synced (disk full, I/O error, a file that
    cannot be created): Kafka's KafkaStorageException. Whatever the failed write left behind
    has been rolled back, so the next write may succeed once the cause is gone."""


class UpstreamError(LazyconvError):
    """The Kafka cluster behind the gateway could not be reached, or answered something the
    gateway cannot use (no common API version above Kafka 4.0's floor, a malformed response)."""


class UnansweredRequestError(LazyconvError):
    """A request that gets no answer (a Produce with acks=0) failed: the server closes the
    client's connection so that the client notices, as a Kafka broker closes it."""


class AuthenticationError(LazyconvError):
    """A SASL exchange failed or a certificate was refused: the peer's credentials (a client of
    ours), or ours (the cluster refused the gateway). The message never holds a secret and never
    says which part of the credentials was wrong."""


class UpstreamAuthenticationError(UpstreamError, AuthenticationError):
    """The cluster refused the credentials an upstream connection authenticated with (a
    client's own, in the gateway's passthrough mode, or those configured for its principal)."""


class TlsError(LazyconvError):
    """A TLS connection that cannot be set up or continued: a failed handshake, a record that
    does not decrypt, a peer that closed in the middle of the handshake."""


class TlsMismatchError(TlsError):
    """One side speaks TLS and the other plaintext: a PLAINTEXT client on an SSL listener (its
    first bytes are not a TLS handshake record), or TLS sent to a PLAINTEXT port."""


class CertificateVerificationError(TlsError):
    """The peer's certificate does not verify: an unknown CA, an expired certificate, a host
    name it was not issued for, or none presented where one is required."""


# -- Kafka's error codes (a wire fact every layer that answers Kafka requests shares) ---------

class ErrorCode(IntEnum):
    """Kafka protocol error codes lazyconv sends or reads, with Kafka's numbers (``Errors.java``;
    docs/guide/fetch-response.md for Fetch)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    SASL_AUTHENTICATION_FAILED = 58
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    INVALID_RECORD = 87
    PRODUCER_FENCED = 90
    UNKNOWN_TOPIC_ID = 100
    INCONSISTENT_TOPIC_ID = 103
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    TRANSACTION_ABORTABLE = 120
