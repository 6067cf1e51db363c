"""Fixed inputs and Kafka's lz4 frames of them, for tests/records/test_lz4_parity.py and
tests/kafka/test_lz4_kafka.py.

Kafka compresses lz4 with its own frame writer (``Lz4BlockOutputStream``, 64 KiB independent
blocks) over lz4-java's fast compressor at the default level 9 (``highCompressor(level)``
otherwise). The expected sizes and SHA-256 digests below are what that writer produced for the
same bytes: Kafka 3.9.0's ``Compression.lz4().level(L).build().wrapForOutput(buffer, magic)``
(the path MemoryRecordsBuilder takes) with lz4-java 1.8.0 (JNI, x86_64) from the
distribution's ``libs/``, driven by ``tests/kafka/Lz4Reference.java``. To regenerate them:
``python tests/lz4_parity.py DIR`` writes the inputs, then
``javac -cp "$LAZYCONV_KAFKA_DIST_3/libs/*" -d OUT tests/kafka/Lz4Reference.java`` and
``java -cp "OUT:$LAZYCONV_KAFKA_DIST_3/libs/*" Lz4Reference 9 MAGIC DIR/NAME`` write
``DIR/NAME.L9.M<magic>.lz4``.

While lazyconv compressed with python-lz4's block API (a streaming context, so half the hash
table of lz4-java's fast compressor) its frames were 4-17 % larger, here 4.6-5.8 %: ``text-64k``
took 34,005 bytes against Kafka's 32,459, ``v0-inner`` 55,154 against 52,114. Now they are
Kafka's byte for byte (docs/guide/benchmarks.md, "lz4 against Kafka").
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from lazyconv.conversion._down import down_convert
from lazyconv.records import MemoryRecords
from lazyconv.records._builder import RecordsBuilder
from lazyconv.records._compression import Compression, decompress

LZ4 = Compression.LZ4


def _words() -> list[bytes]:
    """512 lower-case words of 2..9 letters, from SHA-256 (the same on every Python)."""
    words = []
    for i in range(512):
        digest = hashlib.sha256(b"word%d" % i).digest()
        words.append(bytes(97 + b % 26 for b in digest[1 : 2 + digest[0] % 8]))
    return words


def text(size: int, seed: bytes = b"text") -> bytes:
    """``size`` bytes of semi-compressible text: words chosen by a SHA-256 counter stream."""
    words = _words()
    out = bytearray()
    counter = 0
    while len(out) < size:
        digest = hashlib.sha256(seed + counter.to_bytes(8, "big")).digest()
        counter += 1
        for i in range(0, 32, 2):
            out += words[int.from_bytes(digest[i : i + 2], "big") % 512] + b" "
    return bytes(out[:size])


def record_batch() -> bytes:
    """One v2 lz4 batch of 300 records (8-byte keys, 300-byte text values, a header)."""
    values = text(300 * 300, b"values")
    builder = RecordsBuilder(2, LZ4, base_offset=1000)
    for i in range(300):
        builder.append(1000 + i, 1_700_000_000_000 + i, b"key%05d" % i,
                       values[i * 300 : (i + 1) * 300], [("h", b"%d" % i)])
    return builder.build()


def inputs() -> dict[str, bytes]:
    """The uncompressed inputs Kafka's writer compressed for the expectations below."""
    batch = record_batch()
    found = {
        "text-64k": text(64 * 1024),
        "text-200k": text(200_000, b"long"),
        "text-1k": text(1024, b"short"),
        "v2-records": decompress(LZ4, batch[61:], 2),
    }
    for magic in (0, 1):
        found[f"v{magic}-inner"] = decompress(LZ4, wrapper_value(batch, magic), magic)
    return found


def wrapper_value(batch: bytes, magic: int) -> bytes:
    """The value of the one wrapper message ``batch`` down-converts to (offset, size, crc,
    magic, attributes, [timestamp], key, value)."""
    entry = bytes(down_convert(MemoryRecords(batch).batches(), magic, 0).records.buffer)
    assert int.from_bytes(entry[8:12], "big") + 12 == len(entry), "one wrapper"
    pos = 8 + 4 + 4 + 1 + 1 + (8 if magic == 1 else 0)
    key_len = int.from_bytes(entry[pos : pos + 4], "big", signed=True)
    pos += 4 + max(key_len, 0)
    value_len = int.from_bytes(entry[pos : pos + 4], "big", signed=True)
    return entry[pos + 4 : pos + 4 + value_len]


# name -> (frame magic, input size, input SHA-256 prefix, Kafka's frame size, its SHA-256 prefix);
# Kafka 3.9.0 Lz4BlockOutputStream(blockSize 4 = 64 KiB, level 9, no block checksum,
# useBrokenFlagDescriptorChecksum = magic 0), lz4-java 1.8.0 JNI, x86_64
KAFKA_LZ4 = {
    "text-64k": (1, 65536, "8777f5bcfa311ec4", 32459, "a034c4691e4d457c"),
    "text-200k": (1, 200000, "2d15ba9734ea3f32", 100121, "4182feb9ed3f99ad"),
    "text-1k": (1, 1024, "3b5e51d4c3d9926f", 943, "f2cd0160aeaa7275"),
    "v2-records": (2, 97262, "9068b9fd76db8d2b", 50689, "6ea0e41fd135a4f4"),
    "v0-inner": (0, 100200, "f5237c270b69f33f", 52114, "01fb71138b917d0e"),
    "v1-inner": (1, 102600, "bc21934673d16e49", 52916, "142b16ff9bcb815c"),
}


# Kafka 3.9.0's frame sizes of text-64k (magic 1) per compression.lz4.level (same writer as above)
KAFKA_HC_SIZES = {1: 30944, 4: 30352, 9: 32459, 12: 30049, 17: 30049}


if __name__ == "__main__":  # the inputs for the Java reference: python tests/lz4_parity.py DIR
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in inputs().items():
        (folder / name).write_bytes(data)
