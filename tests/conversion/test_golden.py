"""Golden cases produced by Kafka's Java record classes (tests/golden): eager down-conversion,
``FileRecords.downConvert`` and the lazy send, compared with ours.

Rules: byte-identical where the input holds no compressed batch; record-identical (read by
kafka-python, as a consumer would) where it does, since compressed payloads are
library-dependent. Where Kafka's lazy send has a defect (a batch sent twice; good batches lost
in a zstd chunk) we check our documented behaviour instead, and that Kafka's bytes do show the
defect.
"""

from __future__ import annotations

import json

import golden_cases
import pytest
from golden_cases import GOLDEN_DIR
from lazy_support import TrickleChannel, consumer_records, drive

from lazyconv.conversion._chunks import overflow_padding
from lazyconv.conversion._down import (
    ConversionStats,
    down_convert,
    down_convert_bytes,
    down_convert_file,
)
from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.errors import UnsupportedCompressionError
from lazyconv.records import Compression, FileRecords

# Conversions where Kafka's lazy send re-sends the first converted batch (Kafka's duplicate batch).
DUPLICATE_CASES = {
    ("09_control_first_duplicate", "to1_f0"),
    ("09_control_first_duplicate", "to0_f0"),
    ("12_mid_batch_fetch_uncompressed", "to1_f210_whole_first_batch_dropped"),
}
# Conversions where Kafka loses good batches in the chunk of a later zstd batch (zstd fails the whole call).
ZSTD_MID_CHUNK_CASES = {("06_zstd_after_data", "to1_f0"), ("06_zstd_after_data", "to0_f0")}


CASES = [(case, conv) for case in golden_cases.cases() for conv in case["conversions"]]


def _ids() -> list[str]:
    return [f"{case['name']}-{conv['name']}" for case, conv in CASES]


def _open_input(case: dict, conv: dict) -> FileRecords:
    records = FileRecords.open(GOLDEN_DIR / case["dir"] / case["input"])
    if conv.get("slice"):
        position, size = (int(x) for x in conv["slice"].split(":"))
        records = records.slice(position, size)
    return records


def _input_is_uncompressed(case: dict) -> bool:
    lines = (GOLDEN_DIR / case["dir"] / case["input_dump"]).read_text().splitlines()
    return all(
        json.loads(line).get("compression") in (None, "none") for line in lines
    )


def _golden_bytes(case: dict, name: str) -> bytes:
    return (GOLDEN_DIR / case["dir"] / name).read_bytes()


@pytest.mark.parametrize(("case", "conv"), CASES, ids=_ids())
def test_eager_down_conversion(case: dict, conv: dict) -> None:
    expected = conv["downconvert"]
    with _open_input(case, conv) as records:
        if "error" in expected:
            assert expected["error"].endswith("UnsupportedCompressionTypeException")
            with pytest.raises(UnsupportedCompressionError, match="zstandard"):
                down_convert(records.batches(), conv["to_magic"], conv["first_offset"])
            return
        result = down_convert(records.batches(), conv["to_magic"], conv["first_offset"])
        ours = bytes(result.records.buffer)
    java = _golden_bytes(case, expected["file"])
    # Builder accounting counts uncompressed bytes, so the stats match even for compressed data.
    assert result.stats.records_converted == expected["stats"]["num_records_converted"]
    assert result.stats.temporary_memory_bytes == expected["stats"]["temporary_memory_bytes"]
    assert result.stats.conversion_time_ns >= 0
    if _input_is_uncompressed(case):
        assert ours == java
    else:
        assert consumer_records(ours) == consumer_records(java)
        assert len(consumer_records(ours)) == len(consumer_records(java))


@pytest.mark.parametrize(
    ("case", "conv"),
    [(c, v) for c, v in CASES if "error" not in v["downconvert"]],
    ids=[f"{c['name']}-{v['name']}" for c, v in CASES if "error" not in v["downconvert"]],
)
@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_file_down_conversion(case: dict, conv: dict) -> None:
    """``FileRecords.downConvert`` returns the input itself when nothing was converted,
    otherwise the same as ``RecordsUtil.downConvert``."""
    expected = conv.get("downconvert_file", conv["downconvert"])
    with _open_input(case, conv) as records:
        result = down_convert_file(records, conv["to_magic"], conv["first_offset"])
        if conv["downconvert"]["stats"]["num_records_converted"] == 0:
            assert result.records is records
            assert result.stats == ConversionStats()
            ours = records.to_send().to_bytes()
        else:
            assert result.records is not records
            assert result.stats.records_converted == expected["stats"]["num_records_converted"]
            ours = bytes(result.records.buffer)
    java = _golden_bytes(case, expected["file"])
    if _input_is_uncompressed(case) or result.stats.records_converted == 0:
        assert ours == java
    else:
        assert consumer_records(ours) == consumer_records(java)


def _expected_improved(records: FileRecords, to_magic: int, first_offset: int, size: int) -> bytes:
    """Our lazy send, by its definition: the eager conversion of every batch before the first
    zstd one (target < 2), cut at the committed size or followed by overflow padding."""
    good = []
    for batch in records.batches():
        if to_magic < 2 and not batch.is_control and batch.compression == Compression.ZSTD:
            break
        good.append(batch)
    converted, _ = down_convert_bytes(good, to_magic, first_offset)
    if len(converted) >= size:
        return converted[:size]
    return converted + overflow_padding(size - len(converted))


@pytest.mark.parametrize(("case", "conv"), CASES, ids=_ids())
def test_lazy_send(case: dict, conv: dict) -> None:
    expected = conv["lazysend"]
    key = (case["name"], conv["name"])
    to_magic, first_offset = conv["to_magic"], conv["first_offset"]
    with _open_input(case, conv) as records:
        if "error" in expected:
            assert expected["stage"] == "constructor"
            with pytest.raises(UnsupportedCompressionError, match="zstandard"):
                LazyDownConvertedRecords(records, to_magic, first_offset)
            return
        lazy = LazyDownConvertedRecords(records, to_magic, first_offset)
        send = lazy.to_send()
        ours = drive(send, TrickleChannel([4096, 1, 0, 77]))
        improved = _expected_improved(records, to_magic, first_offset, lazy.size_in_bytes)
    java = _golden_bytes(case, expected["file"])
    assert len(ours) == lazy.size_in_bytes == send.size
    assert ours == improved
    uncompressed = _input_is_uncompressed(case)
    if uncompressed:
        assert lazy.size_in_bytes == expected["size_in_bytes"]
    if key in DUPLICATE_CASES:
        # Kafka sends the first converted batch twice; we send every record once.
        java_offsets = [r[0] for r in consumer_records(java)]
        assert len(java_offsets) > len(set(java_offsets))
        assert consumer_records(ours) == consumer_records(
            _golden_bytes(case, conv["downconvert"]["file"])
        )
        assert lazy.stats.records_converted == conv["downconvert"]["stats"]["num_records_converted"]
        assert lazy.stats.records_converted < expected["stats"]["num_records_converted"]
        return
    if key in ZSTD_MID_CHUNK_CASES:
        # Kafka pads right after the first batch; we also deliver the lz4 batch before the zstd one.
        java_records = consumer_records(java)
        our_records = consumer_records(ours)
        assert our_records[: len(java_records)] == java_records
        assert [r[0] for r in our_records] == [0, 1, 2, 3, 4, 5]
        assert ours[: expected["write_sizes"][0]] == java[: expected["write_sizes"][0]]
        assert send.error is not None and send.padding_bytes > 0
        return
    assert lazy.stats.records_converted == expected["stats"]["num_records_converted"]
    assert lazy.stats.temporary_memory_bytes == expected["stats"]["temporary_memory_bytes"]
    if uncompressed:
        assert ours == java
        assert send.piece_sizes == expected["write_sizes"]
    else:
        assert consumer_records(ours) == consumer_records(java)
