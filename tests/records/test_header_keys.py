"""Header keys that are not UTF-8: Kafka stores them, so both twins read them
(docs/differences.md, "Header keys that are not UTF-8"): each byte that is not UTF-8 becomes a
lone surrogate (``surrogateescape``), the key encodes back to the stored bytes, the batch
validates, re-encodes byte for byte and digests over the stored bytes."""

from __future__ import annotations

from typing import Any

import pytest

from lazyconv.records import MemoryRecords, RecordsBuilder, _impl
from lazyconv.records._builder import encode_v2_batch
from lazyconv.records._codec import encode_varint, encode_varlong
from lazyconv.records._compression import Compression, compress
from lazyconv.records._digest import digest_v2_records, digest_v2_records_reference, record_digest

TWINS = [pytest.param("python", id="python"),
         pytest.param("native", id="native", marks=pytest.mark.skipif(
             _impl.NATIVE is None, reason="compiled kernel not in use"))]

# not UTF-8 for Python's strict decoder: stray bytes, a UTF-16 surrogate encoded (CESU), an
# overlong NUL, a code point above U+10FFFF, a truncated sequence; then valid keys
ODD_KEYS = [b"\xff\xfe", b"\xed\xa0\x80", b"\xc0\x80", b"\xf4\x90\x80\x80", b"a\xe2\x82", b"x\x80y"]
VALID_KEYS = [b"", b"plain", "é€😀".encode()]
T = 1_700_000_000_000


def raw_record(delta: int, headers: list[tuple[bytes, bytes | None]]) -> bytes:
    body = b"\x00" + encode_varlong(delta) + encode_varint(delta) + encode_varint(1) + b"k"
    body += encode_varint(1) + b"v" + encode_varint(len(headers))
    for key, value in headers:
        body += encode_varint(len(key)) + key
        body += encode_varint(-1) if value is None else encode_varint(len(value)) + value
    return encode_varint(len(body)) + body


def batch(codec: int = 0) -> tuple[bytes, bytes]:
    """A v2 batch whose records carry every key above; also its uncompressed records."""
    records = b"".join(raw_record(i, [(key, b"v%d" % i), (b"ok", None)])
                       for i, key in enumerate(ODD_KEYS + VALID_KEYS))
    count = len(ODD_KEYS + VALID_KEYS)
    payload = records if codec == 0 else compress(Compression(codec), records, 2)
    return encode_v2_batch(base_offset=10, partition_leader_epoch=0, attributes=codec,
                           last_offset_delta=count - 1, base_timestamp=T, max_timestamp=T + count - 1,
                           producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=count,
                           payload=payload), records


def read(data: bytes) -> list[Any]:
    (b,) = list(MemoryRecords(data).batches())
    b.validate()
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in b]


@pytest.mark.parametrize("twin", TWINS)
@pytest.mark.parametrize("codec", [0, 1, 3])
def test_keys_read_with_surrogates_and_encode_back_to_the_stored_bytes(twin: str, codec: int) -> None:
    data, _ = batch(codec)
    with _impl.using(twin):
        records = read(data)
    keys = [r[4][0][0] for r in records]
    assert [k.encode("utf-8", "surrogateescape") for k in keys] == ODD_KEYS + VALID_KEYS
    assert keys[0] == "\udcff\udcfe" and keys[-1] == "é€😀"
    assert all(r[4][1] == ("ok", None) for r in records)
    with _impl.using(twin):  # written back: the same batch, byte for byte
        b = RecordsBuilder(2, compression=codec, base_offset=10, partition_leader_epoch=0)
        for offset, timestamp, key, value, headers in records:
            b.append(offset, timestamp, key, value, headers)
        assert b.build() == data or codec != 0  # compressed: the codec's bytes may differ
        assert read(b.build()) == records


def test_both_twins_read_the_same_records() -> None:
    if _impl.NATIVE is None:
        pytest.skip("compiled kernel not in use")
    for codec in (0, 1):
        data, _ = batch(codec)
        with _impl.using("native"):
            native = read(data)
        with _impl.using("python"):
            assert read(data) == native


@pytest.mark.parametrize("twin", TWINS)
def test_digests_cover_the_stored_key_bytes(twin: str) -> None:
    data, records = batch()
    count = len(ODD_KEYS + VALID_KEYS)
    with _impl.using(twin):
        digest = digest_v2_records(records, count, 10, T, None)
    assert digest is not None
    assert digest == digest_v2_records_reference(records, count, 10, T, None)
    by_hand = sum(record_digest(10 + i, T + i, b"k", b"v", [(key.decode("utf-8", "surrogateescape"), b"v%d" % i),
                                                         ("ok", None)])
                  for i, key in enumerate(ODD_KEYS + VALID_KEYS)) & (2**64 - 1)
    assert digest.full == by_hand
    # a different stored byte is a different digest (the key is not replaced by U+FFFD)
    other = records.replace(b"\xff\xfe", b"\xff\xfd", 1)
    with _impl.using(twin):
        changed = digest_v2_records(other, count, 10, T, None)
    assert changed is not None and changed.full != digest.full


def test_the_fixtures_record_hash_takes_such_keys_as_the_digest_does() -> None:
    """The generator's record hash and the records layer's digest agree on a key that is not
    UTF-8 (both hash the key's stored bytes)."""
    from lazyconv.fixtures import record_hash
    from lazyconv.records._digest import record_digest

    headers = [("a\udcffb", b"x"), ("ok", None)]
    assert record_hash(7, 1000, b"k", b"v", headers) == record_digest(7, 1000, b"k", b"v", headers)
