"""lazyconv.conversion._up against the real thing: a Kafka 3.9 broker, which still up-converted the
magic 0/1 message sets of Produce v0–2 requests (Kafka 4 refuses them).

Raw Produce v0/v1/v2 requests (plain sockets, lazyconv's protocol encoders) carry message sets
written by RecordsBuilder or broken by hand; what the broker stored is read back with a raw
Fetch v4 and compared with :func:`lazyconv.conversion._up.up_convert`'s batch: the records always,
the header fields always, and for uncompressed data every byte once the base offset and the
partition leader epoch (which the broker sets; both outside the CRC) are zeroed. Every refusal
is checked for the error code the broker answered; the cases where up_convert is stricter than
Kafka on purpose check Kafka's (documented) behaviour too.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any, NamedTuple

import legacy_message_sets
import pytest
from kafka_broker import KafkaBroker, create_topic
from legacy_message_sets import fix_crc as _fix_crc
from legacy_message_sets import flip as _flip
from legacy_message_sets import message as _message
from legacy_message_sets import v0 as _v0

from lazyconv.conversion._up import kafka_error_code, up_convert
from lazyconv.errors import (
    CorruptRecordError,
    InvalidTimestampError,
    LazyconvError,
    TruncatedDataError,
)
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol import _produce as produce
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._headers import decode_response_header, encode_request_header
from lazyconv.protocol._primitives import Reader
from lazyconv.records import Compression, MemoryRecords, RecordsBuilder, encode_v2_batch
from lazyconv.records._batch import DefaultBatch
from lazyconv.records._compression import compress

pytestmark = pytest.mark.kafka

T = 1_600_000_000_000  # old timestamps: the broker runs with log.retention.ms=-1
LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
# the hand-written message sets (tests/legacy_message_sets.py), with this module's timestamp
_v1 = partial(legacy_message_sets.v1, ts=T)
_wrapper = partial(legacy_message_sets.wrapper, ts=T)


# -- a raw client --------------------------------------------------------------------------------


class RawClient:
    """One plain socket to the broker: Metadata (auto-creates topics), Produce, Fetch."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.address = (host, int(port))
        self.sock: socket.socket | None = None
        self.correlation_id = 0

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _recv(self, n: int) -> bytes:
        assert self.sock is not None
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)

    def call(self, spec: ApiSpec, version: int, body: dict[str, Any]) -> dict[str, Any]:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=30)
        self.correlation_id += 1
        header = encode_request_header(spec.request_header_version(version), spec.key, version,
                                       self.correlation_id, "upconvert-oracle")
        payload = header + spec.encode_request(version, body)
        try:
            self.sock.sendall(struct.pack(">i", len(payload)) + payload)
            reader = Reader(self._recv(struct.unpack(">i", self._recv(4))[0]))
        except OSError:
            self.close()
            raise
        assert decode_response_header(reader, spec.response_header_version(version))["correlation_id"] == self.correlation_id
        return spec.decode_response(version, reader, exact=False)

    def new_topic(self, compacted: bool = False) -> str:
        topic = f"upconvert-{uuid.uuid4().hex[:10]}"
        if compacted:
            create_topic(f"{self.address[0]}:{self.address[1]}", topic, configs={"cleanup.policy": "compact"})
            return topic
        deadline = time.monotonic() + 60
        while True:  # a Metadata request naming a new topic creates it (auto.create.topics.enable)
            body = {"topics": [{"name": topic}], "allow_auto_topic_creation": True}
            found = self.call(metadata.SPEC, 4, body)["topics"][0]
            if found["error_code"] == 0 and found["partitions"] and found["partitions"][0]["leader_id"] >= 0:
                return topic
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic} has no leader: {found}")
            time.sleep(0.05)

    def produce(self, topic: str, records: bytes, version: int) -> dict[str, Any]:
        body: dict[str, Any] = {"acks": -1, "timeout_ms": 30000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": records}]}]}
        if version >= 3:
            body["transactional_id"] = None
        for _ in range(100):
            answer = self.call(produce.SPEC, version, body)["responses"][0]["partition_responses"][0]
            # NOT_LEADER_OR_FOLLOWER: the new topic's leader, already in Metadata, is not yet
            # leading (a loaded machine); it is never the answer to the data itself
            if answer["error_code"] != 6:
                return answer
            time.sleep(0.1)
        return answer

    def fetch(self, topic: str, offset: int) -> bytes:
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24, "isolation_level": 0,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 24}]}]}
        for _ in range(100):
            partition = self.call(fetch.SPEC, 4, body)["responses"][0]["partitions"][0]
            # NOT_LEADER_OR_FOLLOWER as in produce(): a produce refused before the log (a magic
            # the request's parser rejects) did not wait for the new leader
            if partition["error_code"] != 6:
                break
            time.sleep(0.1)
        assert partition["error_code"] == 0, partition
        return bytes(partition["records"] or b"")


@pytest.fixture(scope="module")
def client(kafka_broker_3: KafkaBroker) -> Iterator[RawClient]:
    raw = RawClient(kafka_broker_3.bootstrap)
    yield raw
    raw.close()


# -- message sets ----------------------------------------------------------------------------------


def _records(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None, tuple]]:
    """Records with offsets relative to the first batch's base offset."""
    batches = list(MemoryRecords(data).batches())
    base = batches[0].base_offset if batches else 0
    return [(r.offset - base, r.timestamp, r.key, r.value, r.headers) for b in batches for r in b]


_HEADER_FIELDS = ("magic", "attributes", "last_offset_delta", "base_timestamp", "max_timestamp",
                  "producer_id", "producer_epoch", "base_sequence", "record_count")


def _header(batch: DefaultBatch) -> dict[str, int]:
    return {name: getattr(batch, name) for name in _HEADER_FIELDS}


def _zero_broker_fields(batch: bytes) -> bytes:
    """The batch with its base offset and partition leader epoch zeroed (the CRC-32C covers
    neither: it covers the attributes to the end)."""
    data = bytearray(batch)
    data[0:8] = bytes(8)
    data[12:16] = bytes(4)
    return bytes(data)


ROWS = [(b"k0", b"v0", T), (None, b"v1", T + 5), (b"k2", None, T - 3), (None, None, -1), (b"", b"", T + 1),
        (b"k5", b"x" * 500, T + 2)]


# -- the conversions -------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("magic, produce_version", [(0, 0), (0, 1), (1, 2)])
def test_broker_stores_what_up_convert_writes(client: RawClient, magic: int, produce_version: int,
                                              codec: Compression) -> None:
    topic = client.new_topic()
    # one record first, so that the broker's base offset (zeroed in the comparison) is not 0
    assert client.produce(topic, _v1(0), 2)["error_code"] == 0
    builder = RecordsBuilder(magic, codec)
    for offset, (key, value, ts) in enumerate(ROWS):
        builder.append(offset, ts if magic else -1, key, value)
    message_set = builder.build()

    answer = client.produce(topic, message_set, produce_version)
    assert (answer["error_code"], answer["base_offset"]) == (0, 1)
    stored_batches = list(MemoryRecords(client.fetch(topic, 1)).batches())
    assert len(stored_batches) == 1, "Kafka writes one v2 batch for the whole message set"
    stored = stored_batches[0]
    assert isinstance(stored, DefaultBatch)
    stored.validate()
    assert (stored.base_offset, stored.partition_leader_epoch >= 0) == (1, True)

    ours = up_convert(message_set, produce_version=produce_version)
    assert (ours.record_count, ours.source_compression, ours.source_magic) == (len(ROWS), codec, magic)
    stored_bytes = bytes(stored.buffer())
    assert _records(ours.batch) == _records(stored_bytes)
    mine = next(iter(MemoryRecords(ours.batch).batches()))
    assert isinstance(mine, DefaultBatch)
    assert _header(mine) == _header(stored)
    if codec == Compression.NONE:
        assert _zero_broker_fields(ours.batch) == _zero_broker_fields(stored_bytes)
        assert mine.crc == stored.crc


# -- every check, with the code the broker answered --------------------------------------------------

_INNER3 = _v1(0) + _v1(1, ts=T + 1) + _v1(2, ts=T + 2)
_V2_BUILDER = RecordsBuilder(2)
_V2_BUILDER.append(0, T, b"k", b"v")
_V2 = _V2_BUILDER.build()


def _v2(**fields: Any) -> bytes:
    """A one-record v2 batch with some header fields changed."""
    header: dict[str, Any] = dict(
        base_offset=0, partition_leader_epoch=-1, attributes=0, last_offset_delta=0, base_timestamp=T,
        max_timestamp=T, producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=1,
        payload=_V2[61:])
    header.update(fields)
    return encode_v2_batch(**header)


class Case(NamedTuple):
    name: str
    data: bytes
    kafka_code: int  # what the 3.9 broker answered
    produce_version: int = 2
    compacted: bool = False
    stricter: type[LazyconvError] | None = None  # up_convert refuses on purpose where Kafka did not
    kafka_stored: int | None = None  # with `stricter`: how many records Kafka stored anyway


CASES = [
    # accepted: Kafka and up_convert store the same records
    Case("several plain messages, offsets 5,3,9", _v1(5) + _v1(3) + _v1(9), 0),
    Case("v1 wrapper, inner offsets 0,5,7", _wrapper(_v1(0) + _v1(5) + _v1(7), 1, 1, 7), 0),
    Case("v1 wrapper, inner offsets 2,1,0", _wrapper(_v1(2) + _v1(1) + _v1(0), 1, 1, 2), 0),
    Case("v1 wrapper offset 0 (librdkafka)", _wrapper(_INNER3, 2, 1, 0), 0),
    Case("v1 wrapper offset past the last inner", _wrapper(_INNER3, 3, 1, 100), 0),
    Case("v0 wrapper, absolute offsets 100,50,7", _wrapper(_v0(100) + _v0(50) + _v0(7), 1, 0, 9), 0),
    Case("v2 batch in Produce v2", _V2, 0),
    Case("v2 batch in Produce v0", _V2, 0, produce_version=0),
    Case("magic 0 in Produce v2", _v0(0), 0),
    Case("magic 1 in Produce v0", _v1(0), 0, produce_version=0),
    Case("LogAppendTime message with a timestamp", _v1(0, attrs=0x08), 0),
    Case("LogAppendTime wrapper: its timestamp", _wrapper(_INNER3, 1, 1, 2, ts=T + 50, extra_attrs=0x08), 0),
    Case("LogAppendTime bit on inner messages", _wrapper(_v1(0, attrs=8) + _v1(1, ts=-1, attrs=8), 1, 1, 1), 0),
    Case("magic 0 with the timestamp-type bit", _v0(0, attrs=0x08), 0),
    Case("magic 1 with attribute bits 4-5", _v1(0, attrs=0x30), 0),
    Case("lz4 magic 0 with a correct header checksum",
         _wrapper(b"", 3, 0, 2, value=compress(3, _v0(0) + _v0(1) + _v0(2), 1)), 0),
    Case("compacted topic, empty key", _v1(0, key=b""), 0, compacted=True),
    Case("empty set", b"", 0),
    # refused by both, with the same code
    Case("two gzip wrappers", _wrapper(_INNER3, 1, 1, 2) * 2, 87),
    Case("gzip and snappy wrappers", _wrapper(_INNER3, 1, 1, 2) + _wrapper(_INNER3, 2, 1, 2), 87),
    Case("wrapper then plain message", _wrapper(_INNER3, 1, 1, 2) + _v1(3), 87),
    Case("plain message then wrapper", _v1(0) + _wrapper(_INNER3, 1, 1, 2), 87),
    Case("mixed magic 0 then 1", _v0(0) + _v1(1), 87),
    Case("mixed magic 1 then 0", _v1(0) + _v0(1), 87),
    Case("v2 batch then magic 1", _V2 + _v1(1), 87),
    Case("magic 1 then v2 batch", _v1(0) + _V2, 87),
    Case("v2 batch with base offset 5", _v2(base_offset=5), 87),
    Case("v2 batch without records", _v2(record_count=0, last_offset_delta=-1, payload=b""), 87),
    Case("v2 batch, count and offsets disagree", _v2(last_offset_delta=3), 87),
    Case("v2 control batch", _v2(attributes=0x20), 87),
    Case("v2 batch, producer id without sequence", _v2(producer_id=7, producer_epoch=0), 87),
    Case("magic 1 in Produce v3", _v1(0), 87, produce_version=3),
    Case("v0 wrapper in Produce v3", _wrapper(_v0(0), 1, 0, 0), 87, produce_version=3),
    Case("empty set in Produce v3", b"", 87, produce_version=3),
    Case("corrupt CRC, second plain message", _v1(0) + _flip(_v1(1), 30), 2),
    Case("corrupt CRC, wrapper", _flip(_wrapper(_INNER3, 1, 1, 2), 13), 2),
    Case("corrupt CRC, inner message", _wrapper(_v1(0) + _flip(_v1(1), 30) + _v1(2), 1, 1, 2), 2),
    Case("entry size below 14", struct.pack(">qi", 0, 10) + bytes(10), 2),
    Case("magic 3", _fix_crc(_v1(0)[:16] + b"\x03" + _v1(0)[17:]), 2),
    Case("inner size below 14", _wrapper(_v1(0) + struct.pack(">qi", 1, 5) + b"12345", 1, 1, 1), 2),
    Case("v1 wrapper offset below its last inner", _wrapper(_INNER3, 1, 1, 1), 87),
    Case("inner magic 0 in a v1 wrapper", _wrapper(_v1(0) + _v0(1), 1, 1, 1), 87),
    Case("inner magic 1 in a v0 wrapper", _wrapper(_v0(0) + _v1(1), 1, 0, 1), 87),
    Case("compressed inner message", _wrapper(_v1(0) + _wrapper(_v1(0), 1, 1, 0), 1, 1, 1), 87),
    Case("wrapper with a null value", _message(0, T, None, None, 1, 1), 87),
    Case("wrapper without inner messages", _wrapper(b"", 1, 1, 0), 87),
    Case("zstd wrapper, magic 1", _wrapper(_INNER3, 0, 1, 2, extra_attrs=4, value=compress(4, _INNER3, 2)), 87),
    Case("garbage gzip", _wrapper(b"", 1, 1, 0, value=b"\x1f\x8b\x08\x00 garbage garbage garbage"), -1),
    Case("garbage snappy", _wrapper(b"", 2, 1, 0, value=b"garbage garbage garbage"), -1),
    Case("garbage lz4", _wrapper(b"", 3, 1, 0, value=b"garbage garbage garbage"), -1),
    Case("lz4 magic 1 with the magic 0 header checksum", _wrapper(b"", 3, 1, 2, value=compress(3, _INNER3, 0)), -1),
    Case("codec 5 wrapper", _wrapper(_INNER3, 0, 1, 2, extra_attrs=5, value=compress(1, _INNER3, 1)), -1),
    Case("codec 5 plain message", _v1(0, attrs=5), -1),
    Case("LogAppendTime message without a timestamp", _v1(0, ts=-1, attrs=0x08), 32),
    Case("LogAppendTime wrapper without a timestamp", _wrapper(_v1(0) + _v1(1), 1, 1, 1, ts=-1, extra_attrs=8), 32),
    Case("compacted topic, null key", _v1(0) + _v1(1, key=None), 87, compacted=True),
    Case("compacted topic, null inner key", _wrapper(_v1(0) + _v1(1, key=None), 1, 1, 1), 87, compacted=True),
    Case("compacted topic, null key and no LogAppendTime timestamp",
         _wrapper(_v1(0, key=None) + _v1(1), 1, 1, 1, ts=-1, extra_attrs=8), 32, compacted=True),
    # up_convert is stricter on purpose (the module docstring says why)
    Case("trailing partial message", _v1(0) + _v1(1)[:20], 0, stricter=TruncatedDataError, kafka_stored=1),
    Case("only a partial message", _v1(0)[:20], 0, stricter=TruncatedDataError, kafka_stored=0),
    Case("trailing 5 bytes", _v1(0) + bytes(5), 0, stricter=TruncatedDataError, kafka_stored=1),
    Case("partial last inner message", _wrapper(_INNER3 + _v1(3)[:15], 1, 1, 2), 0,
         stricter=TruncatedDataError, kafka_stored=3),
    Case("value length leaves bytes unread",
         _fix_crc(struct.pack(">qiIbbqii", 0, 26, 0, 1, 0, T, -1, 2) + b"1234"), 0,
         stricter=CorruptRecordError, kafka_stored=1),
    Case("key length past the end", _fix_crc(struct.pack(">qiIbbqi", 0, 26, 0, 1, 0, T, 100) + b"12345678"), -1,
         stricter=CorruptRecordError),
    Case("magic 1 message shorter than 22 bytes",
         _fix_crc(struct.pack(">qiIbbii", 0, 14, 0, 1, 0, -1, -1)), -1, stricter=CorruptRecordError),
    Case("timestamp below -1", _v1(0, ts=-5), -1, stricter=InvalidTimestampError),
    Case("timestamp below -1, inner", _wrapper(_v1(0, ts=-5), 1, 1, 0), -1, stricter=InvalidTimestampError),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_checks_and_error_codes(client: RawClient, case: Case) -> None:
    topic = client.new_topic(case.compacted)
    answer = client.produce(topic, case.data, case.produce_version)
    assert answer["error_code"] == case.kafka_code, answer
    stored = client.fetch(topic, 0)
    try:
        ours = up_convert(case.data, produce_version=case.produce_version, compacted_topic=case.compacted)
    except LazyconvError as error:
        if case.stricter is not None:
            assert isinstance(error, case.stricter), error
            assert len(_records(stored)) == (case.kafka_stored or 0)
        else:
            assert case.kafka_code != 0, f"Kafka accepted what up_convert refused: {error}"
            assert kafka_error_code(error) == case.kafka_code, error
            assert stored == b""
        return
    assert case.stricter is None and case.kafka_code == 0, f"up_convert accepted what Kafka refused: {ours}"
    assert _records(ours.batch) == _records(stored)
    assert answer["base_offset"] == (0 if ours.record_count else -1)
