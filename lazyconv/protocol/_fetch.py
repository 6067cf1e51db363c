"""The Fetch API (key 1), versions 0–17: FetchRequest and the lazy FetchResponse encoder.

Schemas follow FetchRequest.json / FetchResponse.json (docs/guide/fetch-response.md) with field
names in snake_case. Flexible from v12: request header v2 / response header v1.

:class:`FetchResponse` never copies or converts records while it is built: it encodes the
metadata, asks each partition's records for its committed ``size_in_bytes`` (S_pre for lazy
down-conversion, the slice length for file records) and so knows the exact response size up
front. :meth:`FetchResponse.to_send` then streams the response partition by partition, each
partition's records through the records' own send (zero-copy ``os.sendfile`` for file slices,
chunked conversion for lazy records), which is created only when its turn comes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from lazyconv._send import BytesSend, Send, SequenceSend
from lazyconv.errors import LocalProtocolError, RemoteProtocolError
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._headers import (
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
)
from lazyconv.protocol._message_codec import decode_message, encode_message
from lazyconv.protocol._primitives import Reader
from lazyconv.protocol._schema import (
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    ArrayOf,
    EncodedMessage,
    Field,
    RecordsSlot,
    Struct,
)

if TYPE_CHECKING:
    from lazyconv._types import SendableRecords

__all__ = [
    "SPEC",
    "FETCH_API_KEY",
    "MIN_FETCH_VERSION",
    "MAX_FETCH_VERSION",
    "FIRST_FLEXIBLE_VERSION",
    "FETCH_REQUEST_SCHEMA",
    "FETCH_RESPONSE_SCHEMA",
    "is_flexible",
    "request_header_version",
    "response_header_version",
    "FetchRequest",
    "FetchResponse",
    "FetchResponseSend",
    "fetch_response_send",
]

_I32 = struct.Struct(">i")


# -- FetchRequest.json ---------------------------------------------------------------------

_REPLICA_STATE = Struct(
    "ReplicaState",
    (
        Field("replica_id", INT32, "15+", default=-1),
        Field("replica_epoch", INT64, "15+", default=-1),
    ),
)
_FETCH_PARTITION = Struct(
    "FetchPartition",
    (
        Field("partition", INT32, "0+"),
        Field("current_leader_epoch", INT32, "9+", default=-1, ignorable=True),
        Field("fetch_offset", INT64, "0+"),
        Field("last_fetched_epoch", INT32, "12+", default=-1),
        Field("log_start_offset", INT64, "5+", default=-1, ignorable=True),
        Field("partition_max_bytes", INT32, "0+"),
        Field("replica_directory_id", UUID, "17+", tag=0, tagged_versions="17+", ignorable=True),
    ),
)
_FETCH_TOPIC = Struct(
    "FetchTopic",
    (
        Field("topic", STRING, "0-12", ignorable=True),
        Field("topic_id", UUID, "13+", ignorable=True),
        Field("partitions", ArrayOf(_FETCH_PARTITION), "0+"),
    ),
)
_FORGOTTEN_TOPIC = Struct(
    "ForgottenTopic",
    (
        Field("topic", STRING, "7-12", ignorable=True),
        Field("topic_id", UUID, "13+", ignorable=True),
        Field("partitions", ArrayOf(INT32), "7+"),
    ),
)
FETCH_REQUEST_SCHEMA = Struct(
    "FetchRequest",
    (
        Field("cluster_id", STRING, "12+", nullable_versions="12+", null_default=True,
              tag=0, tagged_versions="12+", ignorable=True),
        Field("replica_id", INT32, "0-14", default=-1),
        Field("replica_state", _REPLICA_STATE, "15+", tag=1, tagged_versions="15+"),
        Field("max_wait_ms", INT32, "0+"),
        Field("min_bytes", INT32, "0+"),
        Field("max_bytes", INT32, "3+", default=0x7FFFFFFF, ignorable=True),
        Field("isolation_level", INT8, "4+", default=0, ignorable=True),
        Field("session_id", INT32, "7+", default=0, ignorable=True),
        Field("session_epoch", INT32, "7+", default=-1, ignorable=True),
        Field("topics", ArrayOf(_FETCH_TOPIC), "0+"),
        Field("forgotten_topics_data", ArrayOf(_FORGOTTEN_TOPIC), "7+"),
        Field("rack_id", STRING, "11+", default="", ignorable=True),
    ),
)

# -- FetchResponse.json --------------------------------------------------------------------

_EPOCH_END_OFFSET = Struct(
    "EpochEndOffset",
    (Field("epoch", INT32, "12+", default=-1), Field("end_offset", INT64, "12+", default=-1)),
)
_LEADER_ID_AND_EPOCH = Struct(
    "LeaderIdAndEpoch",
    (Field("leader_id", INT32, "12+", default=-1), Field("leader_epoch", INT32, "12+", default=-1)),
)
_SNAPSHOT_ID = Struct(
    "SnapshotId",
    (Field("end_offset", INT64, "0+", default=-1), Field("epoch", INT32, "0+", default=-1)),
)
_ABORTED_TRANSACTION = Struct(
    "AbortedTransaction",
    (Field("producer_id", INT64, "4+"), Field("first_offset", INT64, "4+")),
)
_PARTITION_DATA = Struct(
    "PartitionData",
    (
        Field("partition_index", INT32, "0+"),
        Field("error_code", INT16, "0+"),
        Field("high_watermark", INT64, "0+"),
        Field("last_stable_offset", INT64, "4+", default=-1, ignorable=True),
        Field("log_start_offset", INT64, "5+", default=-1, ignorable=True),
        Field("diverging_epoch", _EPOCH_END_OFFSET, "12+", tag=0, tagged_versions="12+"),
        Field("current_leader", _LEADER_ID_AND_EPOCH, "12+", tag=1, tagged_versions="12+"),
        Field("snapshot_id", _SNAPSHOT_ID, "12+", tag=2, tagged_versions="12+"),
        Field("aborted_transactions", ArrayOf(_ABORTED_TRANSACTION), "4+",
              nullable_versions="4+", ignorable=True),
        Field("preferred_read_replica", INT32, "11+", default=-1),
        Field("records", RECORDS, "0+", nullable_versions="0+", null_default=True),
    ),
)
_FETCHABLE_TOPIC_RESPONSE = Struct(
    "FetchableTopicResponse",
    (
        Field("topic", STRING, "0-12", ignorable=True),
        Field("topic_id", UUID, "13+", ignorable=True),
        Field("partitions", ArrayOf(_PARTITION_DATA), "0+"),
    ),
)
_NODE_ENDPOINT = Struct(
    "NodeEndpoint",
    (
        Field("node_id", INT32, "16+"),
        Field("host", STRING, "16+"),
        Field("port", INT32, "16+"),
        Field("rack", STRING, "16+", nullable_versions="16+", null_default=True),
    ),
)
FETCH_RESPONSE_SCHEMA = Struct(
    "FetchResponse",
    (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("error_code", INT16, "7+", ignorable=True),
        Field("session_id", INT32, "7+", default=0),
        Field("responses", ArrayOf(_FETCHABLE_TOPIC_RESPONSE), "0+"),
        Field("node_endpoints", ArrayOf(_NODE_ENDPOINT), "16+", tag=0, tagged_versions="16+"),
    ),
)


SPEC = ApiSpec(1, "Fetch", 0, 17, 12, FETCH_REQUEST_SCHEMA, FETCH_RESPONSE_SCHEMA,
               first_client_throttled=8)
FETCH_API_KEY = SPEC.key
MIN_FETCH_VERSION = SPEC.min_version
MAX_FETCH_VERSION = SPEC.max_version
FIRST_FLEXIBLE_VERSION = 12
_check_version = SPEC.check_version


def is_flexible(version: int) -> bool:
    """Fetch v12+ uses compact encodings and tagged fields (a version Fetch does not have
    raises :class:`~lazyconv.errors.LocalProtocolError`, as the two below do)."""
    _check_version(version)
    return SPEC.is_flexible(version)


def request_header_version(version: int) -> int:
    """Request header version for a Fetch version: 2 for flexible versions, else 1."""
    _check_version(version)
    return SPEC.request_header_version(version)


def response_header_version(version: int) -> int:
    """Response header version for a Fetch version: 1 for flexible versions, else 0."""
    _check_version(version)
    return SPEC.response_header_version(version)


def _framed(header: bytes, body: bytes) -> bytes:
    return _I32.pack(len(header) + len(body)) + header + body


class FetchRequest:
    """Encode and decode FetchRequest bodies (dicts with Kafka's snake_case field names)."""

    schema = FETCH_REQUEST_SCHEMA

    @staticmethod
    def decode(version: int, data: bytes | bytearray | memoryview) -> dict[str, Any]:
        """Decode a request *body* (no size, no header) of ``version``.

        Raises :class:`~lazyconv.errors.ProtocolError` (with the byte position) on truncated
        or malformed data, and when bytes are left over after the body.
        """
        _check_version(version, remote=True)
        reader = Reader(data)
        body = decode_message(FETCH_REQUEST_SCHEMA, reader, version, is_flexible(version))
        if reader.remaining:
            raise reader.error(f"{reader.remaining} unexpected bytes after a Fetch v{version} request")
        return body

    @staticmethod
    def encode(version: int, body: Mapping[str, Any], *, strict: bool = False) -> bytes:
        """Encode a request body of ``version`` (missing fields take the schema defaults)."""
        _check_version(version)
        encoded = encode_message(FETCH_REQUEST_SCHEMA, body, version, is_flexible(version),
                                 strict=strict, allow_records_slots=False)
        return encoded.to_bytes()

    @staticmethod
    def encode_framed(
        version: int,
        body: Mapping[str, Any],
        correlation_id: int,
        client_id: str | None = "",
        *,
        strict: bool = False,
    ) -> bytes:
        """A whole request as sent on the wire: int32 size, request header, body."""
        header = encode_request_header(
            request_header_version(version), FETCH_API_KEY, version, correlation_id, client_id
        )
        return _framed(header, FetchRequest.encode(version, body, strict=strict))

    @staticmethod
    def decode_framed(data: bytes | bytearray | memoryview) -> tuple[dict[str, Any], dict[str, Any]]:
        """Decode a whole request (int32 size, header, body); returns ``(header, body)``.

        The header's api key must be Fetch and its version one we speak; the size must match.
        """
        reader = Reader(data)
        size = reader.int32("request size")
        if size < 0 or size != reader.remaining:
            raise reader.error(f"request size field says {size} but {reader.remaining} bytes follow", 0)
        # api key and version come first in every header version: peek to pick the header version.
        peek = Reader(data, 4)
        api_key = peek.int16("request_api_key")
        version = peek.int16("request_api_version")
        if api_key != FETCH_API_KEY:
            raise RemoteProtocolError(f"api key {api_key} is not Fetch ({FETCH_API_KEY})", 4)
        _check_version(version, 6, remote=True)
        header = decode_request_header(reader, request_header_version(version))
        body_at = reader.pos
        sub = Reader(bytes(memoryview(data)[body_at:]), base=body_at)
        body = decode_message(FETCH_REQUEST_SCHEMA, sub, version, is_flexible(version))
        if sub.remaining:
            raise sub.error(f"{sub.remaining} unexpected bytes after a Fetch v{version} request")
        return header, body


class FetchResponse:
    """A FetchResponse of ``version`` whose size is known before any record is converted.

    ``body`` uses FetchResponse.json's names in snake_case, e.g.::

        {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
            {"topic": "t", "partitions": [
                {"partition_index": 0, "error_code": 0, "high_watermark": 10,
                 "last_stable_offset": 10, "log_start_offset": 0, "aborted_transactions": [],
                 "preferred_read_replica": -1, "records": records}]}]}

    Missing fields take the schema defaults; fields the version lacks are ignored (with
    ``strict=True``, a non-ignorable one holding a non-default value raises ProtocolError as
    Kafka does). ``records`` is ``None`` (null), bytes, or any object with ``size_in_bytes``
    and ``to_send()``: ``MemoryRecords``, a ``FileRecords`` slice, ``LazyDownConvertedRecords``.

    The metadata is encoded once, here; each partition's committed size is read once, here.
    """

    schema = FETCH_RESPONSE_SCHEMA

    def __init__(self, version: int, body: Mapping[str, Any], *, strict: bool = False) -> None:
        _check_version(version)
        self.version = version
        self.body = body
        self._header_size = 5 if is_flexible(version) else 4
        self._encoded: EncodedMessage = encode_message(
            FETCH_RESPONSE_SCHEMA, body, version, is_flexible(version), strict=strict
        )
        if self.size_in_bytes > 0x7FFFFFFF:  # the Size field is an int32
            raise LocalProtocolError(
                f"a Fetch v{version} response of {self.size_in_bytes} bytes does not fit its "
                "int32 size field"
            )

    @property
    def size_in_bytes(self) -> int:
        """The value of the response's Size field: header + body (records at committed size)."""
        return self._header_size + self._encoded.size

    @property
    def body_size(self) -> int:
        """Size of the body alone (metadata + every partition's committed records size)."""
        return self._encoded.size

    def to_send(self, correlation_id: int) -> Send:
        """A :class:`~lazyconv._send.Send` of the whole response: Size, header, body.

        Its ``size`` is ``4 + size_in_bytes``. Records sends are created lazily, one partition
        at a time; a records object whose send does not have the size it committed to raises
        :class:`~lazyconv.errors.ProtocolError` before a byte of it is written.
        """
        return fetch_response_send(self.framed_parts(correlation_id), 4 + self.size_in_bytes)

    def framed_parts(self, correlation_id: int) -> list[bytes | RecordsSlot]:
        """The whole response (Size, header, body) in order: the metadata as bytes, each
        partition's records as the slot the body committed for them (records of size 0 have
        no slot: there is nothing to write). The bytes a :meth:`to_send` writes, before any
        records send is made, e.g. to describe the response to another process."""
        header = encode_response_header(response_header_version(self.version), correlation_id)
        parts: list[bytes | RecordsSlot] = []
        pending = bytearray(_I32.pack(self.size_in_bytes) + header)
        for part in self._encoded.parts:
            if not isinstance(part, RecordsSlot):
                pending += part
            elif part.size:
                if pending:
                    parts.append(bytes(pending))
                    pending = bytearray()
                parts.append(part)
        if pending:
            parts.append(bytes(pending))
        return parts

    def to_bytes(self, correlation_id: int) -> bytes:
        """The whole response in memory (tests and small responses)."""
        return self.to_send(correlation_id).to_bytes()

    @staticmethod
    def decode(version: int, data: bytes | bytearray | memoryview) -> dict[str, Any]:
        """Decode a response *body* of ``version``; records come back as bytes (or None)."""
        _check_version(version, remote=True)
        reader = Reader(data)
        body = decode_message(FETCH_RESPONSE_SCHEMA, reader, version, is_flexible(version))
        if reader.remaining:
            raise reader.error(f"{reader.remaining} unexpected bytes after a Fetch v{version} response")
        return body

    @staticmethod
    def decode_framed(version: int, data: bytes | bytearray | memoryview) -> tuple[dict[str, Any], dict[str, Any]]:
        """Decode a whole response (int32 size, header, body) of ``version``."""
        _check_version(version, remote=True)
        reader = Reader(data)
        size = reader.int32("response size")
        if size < 0 or size != reader.remaining:
            raise reader.error(f"response size field says {size} but {reader.remaining} bytes follow", 0)
        header = decode_response_header(reader, response_header_version(version))
        body_at = reader.pos
        sub = Reader(bytes(memoryview(data)[body_at:]), base=body_at)
        body = decode_message(FETCH_RESPONSE_SCHEMA, sub, version, is_flexible(version))
        if sub.remaining:
            raise sub.error(f"{sub.remaining} unexpected bytes after a Fetch v{version} response")
        return header, body

    def __repr__(self) -> str:
        return f"FetchResponse(version={self.version}, size_in_bytes={self.size_in_bytes})"


class FetchResponseSend(SequenceSend):
    """The send of a whole FetchResponse: its parts one after another, pulled lazily.

    ``parts`` yields ``(send, is_records)``. Besides the :class:`~lazyconv._send.Send` contract
    it reports, as records parts complete, ``zero_copy_bytes`` (bytes that went out through
    ``os.sendfile``), ``conversion_stats`` (the sum of the lazily converted partitions' stats,
    ``None`` if none) and ``records_sends_completed``. Completed parts are released at once, so
    memory stays bounded by the part being written.
    """

    def __init__(self, parts: Iterator[tuple[Send, bool]], size: int) -> None:
        self._current_is_records = False
        self.zero_copy_bytes = 0
        self.conversion_stats: Any = None
        self.records_sends_completed = 0
        super().__init__(self._children(parts), size)

    def _children(self, parts: Iterator[tuple[Send, bool]]) -> Iterator[Send]:
        # Parts are pulled one at a time and each is finished before the next is pulled, so
        # the flag always describes the part being written.
        for send, is_records in parts:
            self._current_is_records = is_records
            yield send

    def _on_child_done(self, child: Send) -> None:
        if not self._current_is_records:
            return
        self.records_sends_completed += 1
        self.zero_copy_bytes += getattr(child, "zero_copy_bytes", 0)
        stats = getattr(child, "stats", None)
        if stats is not None:
            self.conversion_stats = stats if self.conversion_stats is None else (
                self.conversion_stats + stats
            )

    def _ran_out_error(self) -> Exception:
        return LocalProtocolError(f"fetch response parts ended after {self.written} of {self.size} bytes")

    def __repr__(self) -> str:
        return f"FetchResponseSend(size={self.size}, written={self.written})"


def fetch_response_send(parts: list[bytes | RecordsSlot], size: int) -> FetchResponseSend:
    """The send of a response's :meth:`FetchResponse.framed_parts` (``size``: their total).

    Records sends are created lazily, one partition at a time; a records object whose send does
    not have the size it committed to raises :class:`~lazyconv.errors.LocalProtocolError` before
    a byte of it is written."""
    return FetchResponseSend(_part_sends(parts), size)


def _part_sends(parts: list[bytes | RecordsSlot]) -> Iterator[tuple[Send, bool]]:
    """Each part's send in order, flagged True if it carries records."""
    for part in parts:
        if not isinstance(part, RecordsSlot):
            yield BytesSend(part), False
            continue
        send = _records_send(part.records)
        if send.size != part.size:
            raise LocalProtocolError(
                f"records of type {type(part.records).__name__} committed {part.size} bytes "
                f"but their send has {send.size}"
            )
        yield send, True


def _records_send(records: SendableRecords | bytes | bytearray | memoryview) -> Send:
    if isinstance(records, (bytes, bytearray, memoryview)):
        return BytesSend(records)
    to_send = getattr(records, "to_send", None)
    if to_send is None:
        raise LocalProtocolError(f"records of type {type(records).__name__} have no to_send()")
    send = to_send()
    if not isinstance(send, Send):
        raise LocalProtocolError(f"{type(records).__name__}.to_send() returned {type(send).__name__}, not a Send")
    return send
