"""The per-partition broker decision (docs/guide/fetch-response.md) and KIP-74 limits."""

from __future__ import annotations

import re

import pytest

from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.errors import ConfigurationError, LocalProtocolError
from lazyconv.protocol import (
    API_BY_KEY,
    FETCH_API_KEY,
    ErrorCode,
    FetchBudget,
    FetchRequest,
    FetchResponse,
    api_versions_table,
    broker_partition_response,
    conversion_target_magic,
    error_partition,
    fetch_replica_id,
    is_flexible,
    is_follower_fetch,
    readable_magic,
    request_header_version,
    response_header_version,
)
from lazyconv.protocol._decision import DEFAULT_BROKER_FETCH_MAX_BYTES
from lazyconv.records import Compression, FileRecords, MemoryRecords, RecordsBuilder


def batch(base_offset: int, count: int = 2, magic: int = 2, compression=Compression.NONE,
          value_size: int = 10) -> bytes:
    b = RecordsBuilder(magic, compression, base_offset=base_offset)
    for i in range(count):
        b.append(offset=base_offset + i, timestamp=1000 + i, key=b"k", value=bytes(value_size))
    return b.build()


LOG = b"".join(batch(o) for o in range(0, 10, 2))  # 5 batches, offsets 0..9
BATCH_SIZE = len(batch(0))


@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (2, 1), (3, 1)] + [(v, 2) for v in range(4, 18)])
def test_readable_magic(version: int, magic: int) -> None:
    assert readable_magic(version) == magic


def test_conversion_target_depends_on_version_and_topic_format() -> None:
    assert [conversion_target_magic(v, 2) for v in range(6)] == [0, 0, 1, 1, None, None]
    assert [conversion_target_magic(v, 1) for v in range(4)] == [0, 0, None, None]
    assert [conversion_target_magic(v, 0) for v in range(4)] == [None] * 4
    # a topic's format defaults to magic 2 (every topic of a Kafka 3+ broker)
    assert [conversion_target_magic(v) for v in range(6)] == [0, 0, 1, 1, None, None]


def test_conversion_target_refuses_a_version_or_format_kafka_does_not_define() -> None:
    with pytest.raises(LocalProtocolError, match="Fetch version 18 is not supported"):
        conversion_target_magic(18)
    with pytest.raises(LocalProtocolError, match="Fetch version -1 is not supported"):
        conversion_target_magic(-1, 2)
    with pytest.raises(ConfigurationError, match="topic message format magic must be 0, 1 or 2, got 3"):
        conversion_target_magic(4, 3)


@pytest.mark.parametrize("version", range(0, 10))
def test_zstd_topic_below_v10_is_error_76_even_without_conversion(version: int) -> None:
    p = broker_partition_response(version, 3, MemoryRecords(LOG), fetch_offset=0,
                                  high_watermark=10, topic_compression="zstd")
    assert p == error_partition(3, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
    assert p["records"] == b"" and p["high_watermark"] == -1


def test_zstd_topic_from_v10_is_sent_as_read() -> None:
    records = MemoryRecords(LOG)
    p = broker_partition_response(10, 0, records, fetch_offset=0, high_watermark=10,
                                  topic_compression="zstd")
    assert p["records"] is records and p["error_code"] == 0 and p["high_watermark"] == 10


def test_zstd_batches_in_a_producer_topic_go_unchanged_to_v4() -> None:
    records = MemoryRecords(batch(0, compression=Compression.ZSTD))
    p = broker_partition_response(4, 0, records, fetch_offset=0, high_watermark=2)
    assert p["records"] is records


def test_zstd_first_batch_on_the_conversion_path_is_error_76() -> None:
    records = MemoryRecords(batch(0, compression=Compression.ZSTD) + batch(2))
    p = broker_partition_response(3, 0, records, fetch_offset=0, high_watermark=4)
    assert p == error_partition(0, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)


@pytest.mark.parametrize(("version", "to_magic"), [(0, 0), (1, 0), (2, 1), (3, 1)])
def test_old_versions_get_lazy_conversion(version: int, to_magic: int) -> None:
    p = broker_partition_response(version, 0, MemoryRecords(LOG), fetch_offset=3,
                                  high_watermark=10, last_stable_offset=10, log_start_offset=0)
    lazy = p["records"]
    assert isinstance(lazy, LazyDownConvertedRecords)
    assert (lazy.to_magic, lazy.first_offset) == (to_magic, 3)
    assert p["high_watermark"] == 10 and p["error_code"] == 0
    data = lazy.to_send().to_bytes()
    assert len(data) == lazy.size_in_bytes
    offsets = [r.offset for r in MemoryRecords(data).records()]
    assert offsets[:7] == [3, 4, 5, 6, 7, 8, 9]  # uncompressed: records before 3 dropped


def test_downconversion_disabled_is_error_35_for_consumers_only() -> None:
    consumer = broker_partition_response(1, 0, MemoryRecords(LOG), fetch_offset=0,
                                         high_watermark=10, downconversion_enable=False)
    assert consumer == error_partition(0, ErrorCode.UNSUPPORTED_VERSION)
    follower = broker_partition_response(1, 0, MemoryRecords(LOG), fetch_offset=0,
                                         high_watermark=10, downconversion_enable=False,
                                         is_follower=True)
    assert isinstance(follower["records"], LazyDownConvertedRecords)
    # No conversion needed: the setting does not matter.
    v4 = broker_partition_response(4, 0, MemoryRecords(LOG), fetch_offset=0,
                                   high_watermark=10, downconversion_enable=False)
    assert v4["error_code"] == 0 and v4["records"] is not None


def test_error_read_on_the_conversion_path_has_empty_not_null_records() -> None:
    p = broker_partition_response(2, 0, None, fetch_offset=0, error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
    assert p["records"] == b"" and p["error_code"] == 1 and p["high_watermark"] == -1
    data = FetchResponse(2, {"responses": [{"topic": "t", "partitions": [p]}]}).to_bytes(1)
    assert data.endswith(bytes.fromhex("00000000 0001 ffffffffffffffff 00000000"))
    # without conversion an error read has empty records too (librdkafka rejects null)
    q = broker_partition_response(4, 0, None, fetch_offset=0, error_code=1)
    assert q["records"] == b""
    # Kafka's exact null stays available
    k = broker_partition_response(4, 0, None, fetch_offset=0, error_code=1, null_records=True)
    assert k["records"] is None


@pytest.mark.parametrize("version", range(0, 18))
def test_error_partitions_have_zero_length_records_on_the_wire(version: int) -> None:
    """Every error partition, every version: length 0 (int32 0 / varint 1), never −1 / 0."""
    for p in (error_partition(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
              broker_partition_response(version, 0, None, fetch_offset=5, error_code=1)):
        topic = {"topic": "t", "topic_id": "00000000-0000-0000-0000-000000000001", "partitions": [p]}
        body = FetchResponse(version, {"responses": [topic]}).to_bytes(1)[4:]
        decoded = FetchResponse.decode(version, body[5 if version >= 12 else 4:])
        assert decoded["responses"][0]["partitions"][0]["records"] == b""
        # records length, then (flexible) the partition's, topic's and response's tag sections
        tail = "01 00 00 00" if version >= 12 else "00000000"
        assert body.endswith(bytes.fromhex(tail))


def test_error_partitions_carry_kafkas_invalid_offsets() -> None:
    # FetchResponse.partitionResponse(partition, error): INVALID_HIGH_WATERMARK,
    # INVALID_LAST_STABLE_OFFSET, INVALID_LOG_START_OFFSET and INVALID_PREFERRED_REPLICA_ID are
    # all -1, aborted transactions null; the records empty (null only when asked for)
    invalid = {"partition_index": 7, "error_code": 3, "high_watermark": -1, "last_stable_offset": -1,
               "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1}
    assert error_partition(7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) == {**invalid, "records": b""}
    assert error_partition(7, 3, null_records=True) == {**invalid, "records": None}


def test_a_partition_sent_as_read_is_the_entry_given() -> None:
    records = MemoryRecords(LOG)
    # the fields left out: unknown offsets (-1), no preferred read replica, no aborted transaction
    assert broker_partition_response(4, 2, records, fetch_offset=0) == {
        "partition_index": 2, "error_code": 0, "high_watermark": -1, "last_stable_offset": -1,
        "log_start_offset": -1, "aborted_transactions": [], "preferred_read_replica": -1,
        "records": records}
    aborted = [{"producer_id": 5, "first_offset": 1}]
    p = broker_partition_response(4, 2, records, fetch_offset=0, high_watermark=10, last_stable_offset=8,
                                  log_start_offset=1, aborted_transactions=iter(aborted), preferred_read_replica=3)
    assert (p["high_watermark"], p["last_stable_offset"], p["log_start_offset"], p["preferred_read_replica"]) \
        == (10, 8, 1, 3)
    assert p["aborted_transactions"] == aborted
    # read_uncommitted: null aborted transactions (a nullable array from v4)
    assert broker_partition_response(4, 2, records, fetch_offset=0, aborted_transactions=None)[
        "aborted_transactions"] is None


def test_bytes_read_are_converted_on_the_conversion_path() -> None:
    p = broker_partition_response(1, 0, LOG, fetch_offset=4, high_watermark=10)
    lazy = p["records"]
    assert isinstance(lazy, LazyDownConvertedRecords) and lazy.to_magic == 0
    converted = MemoryRecords(lazy.to_send().to_bytes())
    assert {b.magic for b in converted.batches()} == {0}
    assert [r.offset for r in converted.records()] == [4, 5, 6, 7, 8, 9]


def test_an_error_read_on_the_conversion_path_is_never_null() -> None:
    # even when null records were asked for: Kafka converts the error read's empty records
    p = broker_partition_response(1, 0, None, fetch_offset=0, error_code=1, null_records=True)
    assert p["records"] == b"" and p["error_code"] == 1
    # not hosted: no conversion, sent as read (null)
    q = broker_partition_response(1, 0, None, fetch_offset=0, error_code=3, null_records=True, hosted=False)
    assert q["records"] is None


def test_a_version_kafka_does_not_define_is_refused_even_when_not_hosted() -> None:
    with pytest.raises(LocalProtocolError, match="Fetch version 18 is not supported"):
        broker_partition_response(18, 0, None, fetch_offset=0, error_code=3, hosted=False)


def test_storage_error_is_rewritten_for_v5_and_older() -> None:
    assert broker_partition_response(5, 0, None, fetch_offset=0, error_code=56)["error_code"] == 6
    assert broker_partition_response(6, 0, None, fetch_offset=0, error_code=56)["error_code"] == 56


def test_partition_not_hosted_is_sent_as_read() -> None:
    p = broker_partition_response(0, 0, None, fetch_offset=0, error_code=3, hosted=False,
                                  topic_compression="zstd")
    assert p["records"] == b"" and p["error_code"] == 3


def test_extra_fields_are_copied() -> None:
    p = broker_partition_response(12, 0, b"", fetch_offset=0,
                                  extra_fields={"current_leader": {"leader_id": 1, "leader_epoch": 2}})
    assert p["current_leader"] == {"leader_id": 1, "leader_epoch": 2}


def _decoded_request(version: int, **fields) -> dict:
    body = {"max_wait_ms": 0, "min_bytes": 1, "topics": [], "forgotten_topics_data": [], **fields}
    return FetchRequest.decode(version, FetchRequest.encode(version, body))


@pytest.mark.parametrize("version", [0, 4, 14])
def test_follower_is_found_by_the_body_replica_id_before_v15(version: int) -> None:
    assert fetch_replica_id(version, _decoded_request(version, replica_id=2)) == 2
    assert is_follower_fetch(version, _decoded_request(version, replica_id=2))
    assert is_follower_fetch(version, _decoded_request(version, replica_id=0))  # broker id 0: a broker
    assert fetch_replica_id(version, {}) == -1  # no replica id: a consumer
    assert not is_follower_fetch(version, _decoded_request(version, replica_id=-1))
    assert not is_follower_fetch(version, _decoded_request(version, replica_id=-2))  # debug consumer


@pytest.mark.parametrize("version", [15, 16, 17])
def test_follower_is_found_in_replica_state_from_v15(version: int) -> None:
    follower = _decoded_request(version, replica_state={"replica_id": 3, "replica_epoch": 7})
    assert follower["replica_id"] == -1  # the body field is gone from v15: decoded as its default
    assert fetch_replica_id(version, follower) == 3
    assert is_follower_fetch(version, follower)
    assert not is_follower_fetch(version, _decoded_request(version))  # no tag: a consumer
    assert is_follower_fetch(version, _decoded_request(version, replica_state={"replica_id": 0, "replica_epoch": 1}))
    assert fetch_replica_id(version, {}) == -1


# -- KIP-74 ---------------------------------------------------------------------------------


def test_first_partition_gets_a_whole_batch_beyond_both_limits() -> None:
    budget = FetchBudget(3, max_bytes=10)
    first = budget.read(MemoryRecords(LOG), 0, partition_max_bytes=5)
    assert first.size_in_bytes == BATCH_SIZE
    assert budget.remaining == 0
    # budget exhausted: a later partition gets nothing
    assert budget.read(MemoryRecords(LOG), 0, partition_max_bytes=1000) == b""


def test_later_partition_whose_first_batch_does_not_fit_is_empty() -> None:
    budget = FetchBudget(4, max_bytes=BATCH_SIZE + BATCH_SIZE // 2)
    assert budget.read(MemoryRecords(LOG), 0, 1 << 20).size_in_bytes == BATCH_SIZE + BATCH_SIZE // 2
    budget = FetchBudget(4, max_bytes=1 << 20)
    assert budget.read(MemoryRecords(LOG), 0, BATCH_SIZE).size_in_bytes == BATCH_SIZE
    assert budget.read(MemoryRecords(LOG), 0, BATCH_SIZE - 1) == b""


def test_later_partitions_may_end_inside_a_batch() -> None:
    budget = FetchBudget(7, max_bytes=1 << 20)
    budget.read(MemoryRecords(LOG), 0, BATCH_SIZE)
    part = budget.read(MemoryRecords(LOG), 0, BATCH_SIZE + 5)
    assert part.size_in_bytes == BATCH_SIZE + 5
    assert len(list(part.batches())) == 1  # the partial tail is not a batch
    assert budget.remaining == (1 << 20) - 2 * BATCH_SIZE - 5


@pytest.mark.parametrize("version", [0, 1, 2])
def test_v0_to_v2_hard_limit_returns_a_truncated_first_batch(version: int) -> None:
    budget = FetchBudget(version, max_bytes=5)  # ignored below v3
    part = budget.read(MemoryRecords(LOG), 0, 20)
    assert part.size_in_bytes == 20
    assert bytes(part.buffer) == LOG[:20]


def test_take_applies_the_same_limits_without_a_batch_scan() -> None:
    # What serve calls with its entry index: first batch size, bytes available, partition max.
    budget = FetchBudget(3, max_bytes=10)
    assert budget.take(70, 500, partition_max_bytes=5) == 70  # min_one: a whole first batch
    assert budget.remaining == 0
    assert budget.take(70, 500, partition_max_bytes=1000) == 0
    budget = FetchBudget(4, max_bytes=1000)
    assert budget.take(70, 500, partition_max_bytes=100) == 100  # may end inside a later batch
    assert budget.take(70, 500, partition_max_bytes=69) == 0  # first batch does not fit: nothing
    assert budget.take(70, 30, partition_max_bytes=100) == 30  # bounded by what is readable
    assert budget.remaining == 1000 - 130
    assert FetchBudget(1).take(70, 500, partition_max_bytes=20) == 20  # v0-2: hard limit


def test_an_empty_partition_leaves_the_whole_batch_to_the_next() -> None:
    # ReplicaManager.readFromLocalLog clears minOneMessage only once a read returned bytes
    budget = FetchBudget(4, max_bytes=10)
    assert budget.take(0, 0, partition_max_bytes=5) == 0  # nothing readable
    assert budget.take(70, 500, partition_max_bytes=5) == 70  # the first partition with data
    assert budget.take(70, 500, partition_max_bytes=5) == 0


@pytest.mark.parametrize("version", [0, 1, 2])
def test_v0_to_v2_take_exactly_the_partition_limit(version: int) -> None:
    # no minimum of one batch: the log read's maxLength is the partition's limit, even 0 or 1
    budget = FetchBudget(version)
    assert budget.take(70, 500, partition_max_bytes=0) == 0
    assert budget.take(70, 500, partition_max_bytes=1) == 1
    assert budget.take(70, 500, partition_max_bytes=-5) == 0
    assert bytes(FetchBudget(version).read(MemoryRecords(LOG), 0, 1).buffer) == LOG[:1]


def test_the_budget_is_the_least_of_the_request_broker_and_quota_limits() -> None:
    # KafkaApis: min(fetchRequest.maxBytes, fetch.max.bytes, the quota window's bytes)
    assert FetchBudget(4, max_bytes=1000, broker_max_bytes=2000, quota_max_bytes=300).limit == 300
    assert FetchBudget(4, max_bytes=1000, broker_max_bytes=200, quota_max_bytes=300).limit == 200
    assert FetchBudget(4, max_bytes=100, quota_max_bytes=300).limit == 100
    assert FetchBudget(2, max_bytes=100, quota_max_bytes=300).limit == 300  # MaxBytes is v3+
    assert FetchBudget(4).limit == DEFAULT_BROKER_FETCH_MAX_BYTES
    # 0 is a limit (serve passes it for a negative MaxBytes): the first batch still goes out
    zero = FetchBudget(4, max_bytes=0)
    assert zero.limit == 0 and zero.take(70, 500, partition_max_bytes=1000) == 70
    with pytest.raises(ConfigurationError, match="fetch byte limits must be >= 0"):
        FetchBudget(4, max_bytes=-1)
    with pytest.raises(ConfigurationError, match="fetch byte limits must be >= 0"):
        FetchBudget(4, quota_max_bytes=-1)
    with pytest.raises(LocalProtocolError, match="Fetch version 18 is not supported"):
        FetchBudget(18)


def test_read_starts_at_the_batch_holding_the_fetch_offset() -> None:
    budget = FetchBudget(4, max_bytes=1 << 20)
    part = budget.read(MemoryRecords(LOG), 5, 1 << 20)
    assert bytes(part.buffer) == LOG[2 * BATCH_SIZE:]
    assert FetchBudget(4).read(MemoryRecords(LOG), 10, 1 << 20) == b""


def test_file_records_are_sliced_relative_to_their_start(tmp_path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(LOG)
    with FileRecords.open(path) as log:
        window = log.slice(BATCH_SIZE, 3 * BATCH_SIZE)  # offsets 2..7
        part = FetchBudget(4).read(window, 4, 1 << 20)
        assert isinstance(part, FileRecords)
        assert part.start == 2 * BATCH_SIZE and part.size_in_bytes == 2 * BATCH_SIZE
        assert [b.base_offset for b in part.batches()] == [4, 6]


# each: a public protocol call given a wrong type -> its typed error and words (was: a comparison's
# TypeError, int()'s TypeError or ValueError, AttributeError 'encode' or 'get' or 'batches',
# 'int' object is not iterable)
_R = MemoryRecords(RecordsBuilder(2).build())
WRONG_ARGUMENTS = {
    "encode_framed client_id=5": (lambda: FetchRequest.encode_framed(4, {}, 1, client_id=5),  # type: ignore[arg-type]
                                  LocalProtocolError, "request header client_id: string expected, got 5"),
    "encode_framed version None": (lambda: FetchRequest.encode_framed(None, {}, 1),  # type: ignore[arg-type]
                                   LocalProtocolError, "Fetch version None is not supported"),
    "is_flexible '12'": (lambda: is_flexible("12"), LocalProtocolError, "Fetch version '12' is not supported"),  # type: ignore[arg-type]
    "request_header_version None": (lambda: request_header_version(None),  # type: ignore[arg-type]
                                    LocalProtocolError, "is not supported"),
    "response_header_version 99": (lambda: response_header_version(99), LocalProtocolError, "is not supported"),
    "readable_magic '4'": (lambda: readable_magic("4"), LocalProtocolError, "Fetch version '4' is not supported"),  # type: ignore[arg-type]
    "fetch_replica_id request None": (lambda: fetch_replica_id(4, None),  # type: ignore[arg-type]
                                      ConfigurationError, "a decoded FetchRequest (a mapping) is needed"),
    "error_partition error_code '3'": (lambda: error_partition(0, "3"),  # type: ignore[arg-type]
                                       LocalProtocolError, "error_code must be an int"),
    "broker_partition_response error_code None": (
        lambda: broker_partition_response(4, 0, _R, fetch_offset=0, error_code=None),  # type: ignore[arg-type]
        LocalProtocolError, "error_code must be an int"),
    "broker_partition_response aborted_transactions 5": (
        lambda: broker_partition_response(4, 0, _R, fetch_offset=0, aborted_transactions=5),  # type: ignore[arg-type]
        LocalProtocolError, "aborted_transactions must be an iterable"),
    "broker_partition_response extra_fields [1]": (
        lambda: broker_partition_response(4, 0, _R, fetch_offset=0, extra_fields=[1]),  # type: ignore[arg-type]
        LocalProtocolError, "extra_fields must be a mapping"),
    "FetchBudget broker_max_bytes None": (lambda: FetchBudget(4, broker_max_bytes=None),  # type: ignore[arg-type]
                                          ConfigurationError, "FetchBudget: broker_max_bytes must be an int"),
    "FetchBudget max_bytes '1'": (lambda: FetchBudget(4, "1"),  # type: ignore[arg-type]
                                  ConfigurationError, "FetchBudget: max_bytes must be an int"),
    "FetchBudget.take available None": (lambda: FetchBudget(4).take(1, None, 1),  # type: ignore[arg-type]
                                        ConfigurationError, "FetchBudget.take: available must be an int"),
    "FetchBudget.read records None": (lambda: FetchBudget(4).read(None, 0, 1),  # type: ignore[arg-type]
                                      ConfigurationError, "FetchBudget.read needs records"),
    "FetchBudget.read batches without slice": (
        lambda: FetchBudget(4).read(type("Batches", (), {"batches": lambda self: iter(())})(), 0, 1),  # type: ignore[arg-type]
        ConfigurationError, "FetchBudget.read needs records"),
    "FetchBudget.read fetch_offset None": (lambda: FetchBudget(4).read(_R, None, 1),  # type: ignore[arg-type]
                                           ConfigurationError, "FetchBudget.read: fetch_offset must be an int"),
    "api_versions_table 'x'": (lambda: api_versions_table("x"),  # type: ignore[arg-type]
                               ConfigurationError, "max_versions must map api keys to int versions"),
}


@pytest.mark.parametrize("case", list(WRONG_ARGUMENTS))
def test_wrong_argument_types_are_typed_errors(case: str) -> None:
    call, error, says = WRONG_ARGUMENTS[case]
    with pytest.raises(error, match=re.escape(says)):
        call()


def test_api_spec_supports_no_version_that_is_not_an_int() -> None:
    assert not API_BY_KEY[FETCH_API_KEY].supports("4")  # type: ignore[arg-type]  # was a TypeError
