"""lz4 at parity with Kafka: lazyconv's lz4 frames are byte for byte those of Kafka's writer
(lz4-java) on fixed inputs, without Java: the expectations were made by Kafka 3.9.0 and are
committed in tests/lz4_parity.py (where they came from and how to regenerate them is said
there; tests/kafka/test_lz4_kafka.py reruns the comparison against live distributions)."""

from __future__ import annotations

import hashlib

import pytest
from lz4_parity import KAFKA_HC_SIZES, KAFKA_LZ4, inputs, record_batch, text, wrapper_value

from lazyconv.records._compression import Compression, compress, decompress

LZ4 = Compression.LZ4


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@pytest.fixture(scope="module")
def fixed_inputs() -> dict[str, bytes]:
    return inputs()


@pytest.mark.parametrize("name", sorted(KAFKA_LZ4))
def test_lz4_frames_are_kafkas(fixed_inputs: dict[str, bytes], name: str) -> None:
    magic, size, input_sha, kafka_size, kafka_sha = KAFKA_LZ4[name]
    data = fixed_inputs[name]
    assert (len(data), _sha(data)) == (size, input_sha), "the fixed input changed"
    frame = compress(LZ4, data, magic)
    # the bar: within 2 % of Kafka's size; in fact the same bytes
    assert abs(len(frame) - kafka_size) <= 0.02 * kafka_size, (len(frame), kafka_size)
    assert (len(frame), _sha(frame)) == (kafka_size, kafka_sha)
    assert decompress(LZ4, frame, magic) == data


def test_the_builder_and_down_conversion_write_kafkas_frames(fixed_inputs: dict[str, bytes]) -> None:
    """The v2 batch's records section and the down-converted wrappers' values are the frames
    pinned above (RecordsBuilder and down-conversion compress through the same path)."""
    batch = record_batch()
    assert _sha(batch[61:]) == KAFKA_LZ4["v2-records"][4]
    for magic in (0, 1):
        value = wrapper_value(batch, magic)
        assert (len(value), _sha(value)) == KAFKA_LZ4[f"v{magic}-inner"][3:]


def test_the_hc_levels_are_lz4_javas_high_compressor() -> None:
    """Levels other than 9 take lz4-java's highCompressor(level) (levels above 12 act as 12)."""
    data = text(64 * 1024)
    sizes = {level: len(compress(LZ4, data, 1, level)) for level in (1, 4, 9, 12, 17)}
    assert sizes == KAFKA_HC_SIZES
