"""Produce append validation: every bad produce gets Kafka's error code and nothing to append."""

from __future__ import annotations

import gzip
import struct
import zlib

import pytest

from lazyconv.errors import ConfigurationError
from lazyconv.protocol import _produce as produce
from lazyconv.records import Compression, MemoryRecords, RecordsBuilder, build_end_txn_marker
from lazyconv.records._builder import encode_v2_batch
from lazyconv.serve._append_validation import (
    AppendConfig,
    AppendErrorCode,
    opens_with_a_transactional_batch,
    transactional_producers,
    validate_produce,
)
from lazyconv.serve._producer_table import ProducerStateTable

E = AppendErrorCode


def v2_batch(count: int = 3, *, compression: Compression = Compression.NONE, timestamps=None,
             keys=True, **producer) -> bytes:
    builder = RecordsBuilder(2, compression=compression, **producer)
    for i in range(count):
        ts = 1_000 + i if timestamps is None else timestamps[i]
        builder.append(None, ts, b"k%d" % i if keys else None, b"value-%d" % i)
    return builder.build()


def header_fields(data: bytes) -> dict:
    (base, _length, epoch, _magic, _crc, attrs, delta, base_ts, max_ts, pid, pepoch, seq,
     count) = struct.unpack_from(">qiibIhiqqqhii", data)
    return dict(base_offset=base, partition_leader_epoch=epoch, attributes=attrs,
                last_offset_delta=delta, base_timestamp=base_ts, max_timestamp=max_ts,
                producer_id=pid, producer_epoch=pepoch, base_sequence=seq, record_count=count)


def recrafted(data: bytes, payload: bytes | None = None, **changes) -> bytes:
    """``data`` (one v2 batch) with header fields / payload changed and a *valid* CRC."""
    fields = header_fields(data)
    fields.update(changes)
    return encode_v2_batch(**fields, payload=data[61:] if payload is None else payload)


def assert_rejected(decision, code: AppendErrorCode, fragment: str = "") -> None:
    assert decision.error_code == code, decision.error_message
    assert not decision.accepted
    assert decision.entries == () and decision.append_entries() == []
    assert decision.duplicate is None
    assert fragment in (decision.error_message or "")


# -- the bad produces of issue 15 -----------------------------------------------------------------


def test_a_valid_batch_is_accepted_with_its_offsets() -> None:
    data = v2_batch(3)
    decision = validate_produce(data, produce_version=8)
    assert decision.accepted and decision.error_code == E.NONE
    assert decision.append_entries() == [(data, 3)]
    assert decision.offset_count == 3
    assert decision.response_fields() == {"error_code": 0, "error_message": None, "record_errors": []}


def test_crc_valid_garbage_records_are_invalid_record() -> None:
    good = v2_batch(3)
    garbage = recrafted(good, payload=b"\xff" * (len(good) - 61))
    assert MemoryRecords(garbage).batches().__next__().is_valid()  # the CRC matches
    assert_rejected(validate_produce(garbage, produce_version=8), E.INVALID_RECORD, "invalid record structure")


def test_record_count_disagreeing_with_the_offset_range() -> None:
    bad = recrafted(v2_batch(3), record_count=2)
    assert_rejected(validate_produce(bad, produce_version=8), E.INVALID_RECORD,
                    "Inconsistent batch offset range [0, 2] and count of records 2")


def test_last_offset_delta_of_int32_max_on_a_one_record_batch() -> None:
    bad = recrafted(v2_batch(1), last_offset_delta=2**31 - 1)
    assert_rejected(validate_produce(bad, produce_version=8), E.INVALID_RECORD,
                    "Inconsistent batch offset range [0, 2147483647]")


def test_a_client_may_not_write_a_control_batch() -> None:
    marker = build_end_txn_marker(0, 1_000, producer_id=5, producer_epoch=0, commit=True)
    assert_rejected(validate_produce(marker, produce_version=8), E.INVALID_RECORD,
                    "Clients are not allowed to write control records")


def test_count_zero_with_a_record_present() -> None:
    bad = recrafted(v2_batch(1), record_count=0)
    assert_rejected(validate_produce(bad, produce_version=8), E.INVALID_RECORD,
                    "Invalid reported count for record batch: 0")
    bad_range = recrafted(v2_batch(1), record_count=0, last_offset_delta=-1)
    assert_rejected(validate_produce(bad_range, produce_version=8), E.INVALID_RECORD,
                    "invalid offset range: [0, -1]")


def test_negative_offset_range_is_invalid() -> None:
    bad = recrafted(v2_batch(1), last_offset_delta=-5)
    assert_rejected(validate_produce(bad, produce_version=8), E.INVALID_RECORD, "invalid offset range")


def test_v2_crc_mismatch_is_corrupt_message() -> None:
    data = bytearray(v2_batch(3))
    data[-1] ^= 0x01
    assert_rejected(validate_produce(bytes(data), produce_version=8), E.CORRUPT_MESSAGE, "stored crc")


def test_legacy_crc_mismatch_is_corrupt_message() -> None:
    for magic in (0, 1):
        builder = RecordsBuilder(magic)
        builder.append(0, 1_000 if magic else -1, b"k", b"v")
        data = bytearray(builder.build())
        data[-1] ^= 0x01
        assert_rejected(validate_produce(bytes(data), produce_version=2), E.CORRUPT_MESSAGE)


def test_nonzero_base_offset_from_a_client() -> None:
    bad = recrafted(v2_batch(2), base_offset=7)
    assert_rejected(validate_produce(bad, produce_version=8), E.INVALID_RECORD, "should be 0, but it is 7")


def test_offset_deltas_must_be_0_to_n_minus_1() -> None:
    builder = RecordsBuilder(2)
    builder.append(0, 1_000, b"a", b"1")
    builder.append(2, 1_000, b"b", b"2")  # a gap: deltas 0, 2
    data = recrafted(builder.build(), last_offset_delta=1)  # count 2 == range 2: passes the header
    decision = validate_produce(data, produce_version=8)
    assert_rejected(decision, E.INVALID_RECORD, "1 record errors in total")
    assert [(e.batch_index, "delta 2" in e.message) for e in decision.record_errors] == [(1, True)]
    fields = decision.response_fields()
    assert fields["record_errors"][0]["batch_index"] == 1
    body = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1, **fields}]}],
        "throttle_time_ms": 0}
    v8 = produce.encode_response(8, body)
    assert fields["error_message"].encode() in v8 and b"delta 2" in v8
    assert fields["error_message"].encode() not in produce.encode_response(7, body)


def test_trailing_partial_entry_and_null_records_are_corrupt() -> None:
    data = v2_batch(2)
    assert_rejected(validate_produce(data + data[:20], produce_version=2), E.CORRUPT_MESSAGE, "partial entry")
    assert_rejected(validate_produce(None, produce_version=8), E.CORRUPT_MESSAGE)
    assert_rejected(validate_produce(b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\x00" * 5, produce_version=2),
                    E.CORRUPT_MESSAGE)


# -- request shape, compression, size ------------------------------------------------------------


def test_produce_v3_needs_exactly_one_magic_v2_batch() -> None:
    legacy = RecordsBuilder(1)
    legacy.append(0, 1_000, b"k", b"v")
    assert_rejected(validate_produce(legacy.build(), produce_version=3), E.INVALID_RECORD, "magic version 2")
    assert validate_produce(legacy.build(), produce_version=2).accepted
    two = v2_batch(1) + v2_batch(1)
    assert_rejected(validate_produce(two, produce_version=3), E.INVALID_RECORD, "exactly one record batch")
    assert_rejected(validate_produce(two, produce_version=2), E.INVALID_RECORD, "more than one batch")
    assert_rejected(validate_produce(b"", produce_version=3), E.INVALID_RECORD, "at least one")
    assert validate_produce(b"", produce_version=2).entries == ()


def test_zstd_needs_produce_v7_and_magic_v2() -> None:
    data = v2_batch(3, compression=Compression.ZSTD)
    assert_rejected(validate_produce(data, produce_version=6), E.UNSUPPORTED_COMPRESSION_TYPE, "ZStandard")
    assert validate_produce(data, produce_version=7).append_entries() == [(data, 3)]


def test_unknown_codec_is_corrupt_message() -> None:
    data = v2_batch(2)
    bad = recrafted(data, attributes=header_fields(data)["attributes"] | 0x07)
    assert_rejected(validate_produce(bad, produce_version=8), E.CORRUPT_MESSAGE, "codec id 7")


def test_entry_larger_than_max_message_bytes() -> None:
    data = v2_batch(3)
    config = AppendConfig(max_message_bytes=len(data) - 1)
    assert_rejected(validate_produce(data, produce_version=8, config=config), E.MESSAGE_TOO_LARGE)


def test_compressed_batches_are_validated_after_decompression() -> None:
    good = v2_batch(5, compression=Compression.GZIP)
    assert validate_produce(good, produce_version=8).offset_count == 5
    garbage = recrafted(good, payload=gzip.compress(b"\x01" * 40))
    assert_rejected(validate_produce(garbage, produce_version=8), E.INVALID_RECORD)
    not_gzip = recrafted(good, payload=b"not a gzip stream at all")
    assert_rejected(validate_produce(not_gzip, produce_version=8), E.CORRUPT_MESSAGE)


# -- legacy wrappers -------------------------------------------------------------------------------


def legacy_message(offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None,
                   value: bytes | None, crc_delta: int = 0) -> bytes:
    body = bytes([magic, attributes])
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    crc = (zlib.crc32(body) + crc_delta) & 0xFFFFFFFF
    message = struct.pack(">I", crc) + body
    return struct.pack(">qi", offset, len(message)) + message


def v1_gzip_wrapper(inner: list[bytes], wrapper_offset: int = 0) -> bytes:
    value = gzip.compress(b"".join(inner))
    return legacy_message(wrapper_offset, 1, 1, 2_000, None, value)


def test_v1_wrapper_with_relative_offsets_is_accepted() -> None:
    inner = [legacy_message(i, 1, 0, 1_000 + i, b"k", b"v") for i in range(3)]
    data = v1_gzip_wrapper(inner, wrapper_offset=2)
    assert validate_produce(data, produce_version=2).append_entries() == [(data, 3)]


def test_v1_wrapper_inner_record_errors() -> None:
    inner = [
        legacy_message(0, 1, 0, 1_000, b"k", b"v"),
        legacy_message(1, 0, 0, -1, b"k", b"v"),  # magic 0 inside a v1 wrapper
        legacy_message(5, 1, 0, 1_000, b"k", b"v"),  # not relative offset 2
    ]
    decision = validate_produce(v1_gzip_wrapper(inner, 5), produce_version=2)
    assert_rejected(decision, E.INVALID_RECORD, "2 record errors")
    assert [e.batch_index for e in decision.record_errors] == [1, 2]
    assert "outer magic 1" in decision.record_errors[0].message


def test_v1_wrapper_inner_crc_mismatch() -> None:
    inner = [legacy_message(0, 1, 0, 1_000, b"k", b"v"), legacy_message(1, 1, 0, 1_000, b"k", b"v", 1)]
    decision = validate_produce(v1_gzip_wrapper(inner, 1), produce_version=2)
    assert decision.error_code in (E.CORRUPT_MESSAGE, E.INVALID_RECORD)
    assert decision.entries == ()


def test_a_wrapper_or_v2_batch_must_be_alone_and_magics_must_match() -> None:
    # LogValidator, whatever the Produce version: getFirstBatchAndMaybeValidateNoMoreBatches,
    # then validateBatch's "Batch magic ... is not the same as the first batch's magic byte"
    inner = [legacy_message(i, 1, 0, 1_000, b"k", b"v") for i in range(2)]
    wrapper, plain_v1, plain_v0 = v1_gzip_wrapper(inner, 1), inner[0], legacy_message(0, 0, 0, -1, b"k", b"v")
    for data, fragment in ((wrapper + wrapper, "more than one batch"), (wrapper + plain_v1, "more than one batch"),
                           (plain_v1 + wrapper, "more than one batch"), (v2_batch(1) + plain_v1, "more than one batch"),
                           (plain_v1 + v2_batch(1), "Batch magic 2"), (plain_v1 + plain_v0, "Batch magic 0")):
        assert_rejected(validate_produce(data, produce_version=2), E.INVALID_RECORD, fragment)
    assert validate_produce(plain_v1 + plain_v1, produce_version=2).offset_count == 2


def test_compressed_v0_and_legacy_zstd_are_refused() -> None:
    inner = [legacy_message(i, 0, 0, -1, b"k", b"v") for i in range(2)]
    v0 = legacy_message(1, 0, 1, -1, None, gzip.compress(b"".join(inner)))
    assert_rejected(validate_produce(v0, produce_version=2), E.INVALID_RECORD, "recompression")
    zstd_v1 = legacy_message(0, 1, 4, 1_000, None, b"whatever")
    assert_rejected(validate_produce(zstd_v1, produce_version=2), E.UNSUPPORTED_COMPRESSION_TYPE)


# -- per-record rules from the topic config --------------------------------------------------------


def test_compacted_topic_needs_keys() -> None:
    data = v2_batch(2, keys=False)
    decision = validate_produce(data, produce_version=8, config=AppendConfig(compacted=True))
    assert_rejected(decision, E.INVALID_RECORD)
    assert [e.batch_index for e in decision.record_errors] == [0, 1]
    assert validate_produce(data, produce_version=8).accepted


def test_timestamps_out_of_bounds_are_invalid_timestamp() -> None:
    data = v2_batch(3, timestamps=[10_000, 50_000, 10_500])
    config = AppendConfig(timestamp_before_max_ms=1_000, timestamp_after_max_ms=1_000)
    decision = validate_produce(data, produce_version=8, config=config, now_ms=10_000)
    assert_rejected(decision, E.INVALID_TIMESTAMP)
    assert [e.batch_index for e in decision.record_errors] == [1]
    with pytest.raises(ConfigurationError):
        validate_produce(data, produce_version=8, config=config)


def test_a_producers_log_append_time_needs_a_timestamp_in_bounds() -> None:
    # Kafka's validateTimestamp: a LogAppendTime entry's records carry its timestamp; without
    # one INVALID_TIMESTAMP ("Producer should not set timestamp type to LogAppendTime")
    lat_v2 = recrafted(v2_batch(2), attributes=0x08, max_timestamp=-1)
    lat_v1 = legacy_message(0, 1, 0x08, -1, b"k", b"v")
    lat_wrapper = legacy_message(1, 1, 0x09, -1, None, gzip.compress(b"".join(
        legacy_message(i, 1, 0, 1_000, b"k", b"v") for i in range(2))))
    for data, version, indexes in ((lat_v2, 8, [0, 1]), (lat_v1, 2, [0]), (lat_wrapper, 2, [0, 1])):
        decision = validate_produce(data, produce_version=version)
        assert_rejected(decision, E.INVALID_TIMESTAMP)
        assert [e.batch_index for e in decision.record_errors] == indexes
        assert "LogAppendTime" in decision.record_errors[0].message
    config = AppendConfig(timestamp_before_max_ms=1_000, timestamp_after_max_ms=1_000)
    far = recrafted(v2_batch(2), attributes=0x08, max_timestamp=90_000)
    assert_rejected(validate_produce(far, produce_version=8, config=config, now_ms=10_000), E.INVALID_TIMESTAMP)
    near = recrafted(v2_batch(2), attributes=0x08, max_timestamp=10_500)
    assert validate_produce(near, produce_version=8, config=config, now_ms=10_000).append_entries() == [(near, 2)]


def test_wrong_max_timestamp_is_corrected_with_a_valid_crc() -> None:
    data = recrafted(v2_batch(3, timestamps=[5, 9, 7]), max_timestamp=1)
    (entry,) = validate_produce(data, produce_version=8).entries
    (batch,) = list(MemoryRecords(entry.data).batches())
    assert batch.max_timestamp == 9 and batch.is_valid()
    assert [r.value for r in batch] == [b"value-0", b"value-1", b"value-2"]


# -- idempotent and transactional producers --------------------------------------------------------


def idem(seq: int, count: int = 2, epoch: int = 0, pid: int = 42, txn: bool = False) -> bytes:
    return v2_batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn)


def append(table: ProducerStateTable, data: bytes, base: int):
    decision = validate_produce(data, produce_version=8, producers=table)
    if decision.accepted and decision.entries:
        table.apply(decision, base)
    return decision


def test_sequences_epochs_and_duplicates() -> None:
    table = ProducerStateTable()
    assert append(table, idem(0), 100).accepted  # offsets 100-101, seq 0-1
    assert append(table, idem(2), 102).accepted  # offsets 102-103, seq 2-3
    assert_rejected(append(table, idem(7), 104), E.OUT_OF_ORDER_SEQUENCE_NUMBER, "7 (incoming seq. number)")
    retry = append(table, idem(0), 104)
    assert retry.accepted and retry.entries == () and retry.duplicate is not None
    assert (retry.duplicate.first_offset, retry.duplicate.last_offset) == (100, 101)
    assert append(table, idem(2), 104).duplicate.first_offset == 102
    assert_rejected(append(table, idem(1), 104), E.OUT_OF_ORDER_SEQUENCE_NUMBER)
    # a new epoch must start at sequence 0; an older epoch is fenced
    assert_rejected(append(table, idem(4, epoch=1), 104), E.OUT_OF_ORDER_SEQUENCE_NUMBER, "new epoch")
    assert append(table, idem(0, epoch=1), 104).accepted
    assert_rejected(append(table, idem(4, epoch=0), 106), E.INVALID_PRODUCER_EPOCH, "smaller than")
    assert table.entry(42).producer_epoch == 1


def test_an_unknown_producer_may_start_at_any_sequence_and_wraps_at_int32_max() -> None:
    table = ProducerStateTable()
    assert append(table, idem(2**31 - 2, count=1), 0).accepted
    assert append(table, idem(2**31 - 1, count=1), 1).accepted
    assert append(table, idem(0, count=1), 2).accepted


def test_a_producer_id_needs_a_sequence() -> None:
    bad = recrafted(idem(0), base_sequence=-1)
    assert_rejected(validate_produce(bad, produce_version=8), E.INVALID_RECORD, "Invalid sequence number -1")


def test_non_transactional_write_during_an_open_transaction() -> None:
    table = ProducerStateTable()
    assert append(table, idem(0, txn=True), 0).accepted
    assert table.entry(42).transaction_first_offset == 0
    assert_rejected(append(table, idem(2), 2), E.INVALID_TXN_STATE)
    table.end_transaction(42, 0)
    assert append(table, idem(2), 3).accepted


def test_a_transaction_the_coordinator_did_not_verify_is_not_opened() -> None:
    """With ``verified_producers`` (Kafka's transaction.partition.verification.enable), a
    transactional batch opens a transaction only for a producer the coordinator verified; one
    continuing a transaction open here, a retry of an appended batch and an idempotent batch
    need no verification; ``None`` verifies nothing."""
    table = ProducerStateTable()

    def check(data: bytes, verified):
        return validate_produce(data, produce_version=11, producers=table, verified_producers=verified)

    assert check(idem(0, txn=True), None).accepted
    assert_rejected(check(idem(0, txn=True), set()), E.INVALID_TXN_STATE,
                    "Record of producer 42 was not part of an ongoing transaction")
    assert_rejected(check(idem(0, txn=True), {7}), E.INVALID_TXN_STATE)
    assert check(idem(0), set()).accepted
    opened = check(idem(0, txn=True), {42})
    table.apply(opened, 0)
    assert check(idem(2, txn=True), set()).accepted  # continuing
    table.end_transaction(42, 0)
    assert check(idem(0, txn=True), set()).duplicate is not None  # a retry: the duplicate check comes first
    assert_rejected(check(idem(2, txn=True), set()), E.INVALID_TXN_STATE)


def test_transactional_producers_are_read_from_the_batch_headers() -> None:
    """What the server verifies: the transactional batches with a producer id, of sets that pass
    the request's shape check (Kafka refuses the others before it verifies anything)."""
    assert transactional_producers(idem(0, pid=7, epoch=3, txn=True), 11) == [(7, 3)]
    assert transactional_producers(idem(0, pid=7, epoch=3), 11) == []
    assert transactional_producers(v2_batch(2, is_transactional=True), 11) == []  # no producer id
    assert transactional_producers(idem(0, txn=True) * 2, 11) == []  # two batches: INVALID_RECORD
    assert transactional_producers(idem(0, txn=True) * 2, 2) == [(42, 0), (42, 0)]
    assert transactional_producers(None, 11) == transactional_producers(b"\x00" * 7, 11) == []


def test_a_transactional_first_batch_is_what_needs_a_transactional_id() -> None:
    """Kafka's RequestUtils.hasTransactionalRecords: the first complete batch of the set, with
    the transactional flag, whatever its producer id (a control batch has it too)."""
    marker = build_end_txn_marker(0, 1_000, producer_id=5, producer_epoch=0, commit=True)
    assert opens_with_a_transactional_batch(idem(0, txn=True))
    assert opens_with_a_transactional_batch(v2_batch(2, is_transactional=True))
    assert opens_with_a_transactional_batch(marker)
    assert not opens_with_a_transactional_batch(idem(0))
    assert not opens_with_a_transactional_batch(idem(0) + idem(2, txn=True))  # only the first counts
    assert not opens_with_a_transactional_batch(idem(0, txn=True)[:-1])  # not complete
    assert not opens_with_a_transactional_batch(None)


def test_idempotent_records_need_message_format_v2() -> None:
    config = AppendConfig(message_format_magic=1)
    assert_rejected(validate_produce(idem(0), produce_version=8, config=config),
                    E.UNSUPPORTED_FOR_MESSAGE_FORMAT, "Idempotent records")
    assert_rejected(validate_produce(idem(0, txn=True), produce_version=8, config=config),
                    E.UNSUPPORTED_FOR_MESSAGE_FORMAT, "Transactional records")
    assert validate_produce(v2_batch(2), produce_version=8, config=config).accepted


def test_a_rejected_decision_cannot_be_applied() -> None:
    decision = validate_produce(None, produce_version=8)
    with pytest.raises(ConfigurationError):
        ProducerStateTable().apply(decision, 0)


def test_max_timestamp_is_corrected_whatever_the_attribute_bits() -> None:
    """Found by the fuzzer: attribute bits above bit 14 (unused) must not break the rewrite."""
    data = v2_batch(2, timestamps=[5, 9])
    bad = recrafted(data, attributes=-0x8000, max_timestamp=1)  # bit 15 set, CreateTime
    (entry,) = validate_produce(bad, produce_version=8).entries
    (batch,) = list(MemoryRecords(entry.data).batches())
    assert batch.max_timestamp == 9 and batch.is_valid()
    assert entry.data[:35] == bad[:17] + entry.data[17:21] + bad[21:35]


def test_a_timestamp_beyond_int64_is_invalid_timestamp() -> None:
    """Found by the fuzzer: BaseTimestamp + delta past int64 (Java would wrap it)."""
    data = v2_batch(2, timestamps=[5, 9])
    bad = recrafted(data, base_timestamp=(1 << 63) - 3)  # record 1 (delta 4) is past int64
    decision = validate_produce(bad, produce_version=8)
    assert_rejected(decision, E.INVALID_TIMESTAMP)
    assert [e.batch_index for e in decision.record_errors] == [1]


def test_the_producer_table_forgets_the_least_recent_producer_first() -> None:
    table = ProducerStateTable(max_producers=2)
    assert append(table, idem(0, pid=1), 0).accepted
    assert append(table, idem(0, pid=2), 2).accepted
    assert append(table, idem(2, pid=1), 4).accepted  # producer 1 is now the most recent
    assert append(table, idem(0, pid=3), 6).accepted  # producer 2 is forgotten
    assert len(table) == 2 and table.entry(2) is None and table.entry(1) is not None
    assert append(table, idem(9, pid=2), 8).accepted  # starts afresh, like after Kafka's expiry
    with pytest.raises(ConfigurationError):
        ProducerStateTable(max_producers=0)
