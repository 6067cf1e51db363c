"""Kafka's snappy streams for fixed inputs, for tests/records/test_snappy.py (no Java needed).

``KAFKA_SNAPPY`` maps an input name to ``(size, sha256[:16] of the input, stream size,
sha256[:16] of the stream)``, where the stream is what Kafka 3.9.0's ``Compression.snappy()``
writes (tests/kafka/SnappyReference.java: snappy-java 1.1.10.5, which bundles snappy 1.1.10).
Kafka 4.0.1 (snappy-java 1.1.10.7) writes the same; tests/kafka/test_snappy_kafka.py checks both
live. To regenerate: write each input of ``inputs()`` to a file, run the reference on them and
take the sizes and hashes of the ``.snappy`` files.

Most inputs are small on purpose: below 8 KiB snappy 1.1.10's hash differs from that of Rust's
``snap`` (cramjam), which lazyconv used before, and the streams differ (lazyconv.records._snappy).
"""

from __future__ import annotations

from lz4_parity import text

from lazyconv.records import RecordsBuilder
from lazyconv.records._compression import Compression


def _inner_set(magic: int, count: int) -> bytes:
    """An uncompressed legacy message set, as a down-converted snappy wrapper holds it."""
    values = text(180 * count, b"inner")
    builder = RecordsBuilder(magic, Compression.NONE, base_offset=0)
    for i in range(count):
        builder.append(i, 1_650_000_000_000 + 10 * i, b"key-%04d" % (i % 37),
                       values[i * 180 : (i + 1) * 180], [])
    return builder.build()


def inputs() -> dict[str, bytes]:
    """The uncompressed inputs Kafka's writer compressed for the expectations below."""
    found = {"empty": b"", "short-14": text(14, b"s14"), "short-15": text(15, b"s15"),
             "short-16": text(16, b"s16")}
    for i in range(8):
        found[f"value-180-{i}"] = text(180, b"value%d" % i)
    for size in (1800, 3600, 8192, 8193, 32768, 40000, 70000):
        found[f"text-{size}"] = text(size, b"t%d" % size)
    for magic in (0, 1):
        for count in (1, 10, 60):
            found[f"v{magic}-inner-{count}"] = _inner_set(magic, count)
    return found


KAFKA_SNAPPY: dict[str, tuple[int, str, int, str]] = {
    "empty": (0, "e3b0c44298fc1c14", 16, "8cede7614db4fc15"),
    "short-14": (14, "9187d7acab9fd902", 36, "555dbb219354fb3d"),
    "short-15": (15, "f06cd551bef9ce82", 37, "2da98e6f578860e6"),
    "short-16": (16, "dcfda7e1701be990", 38, "9cbe64914c9bc51c"),
    "value-180-0": (180, "677965d35290de5a", 203, "4cae75ce490b20ba"),
    "value-180-1": (180, "ea0f4bb91cf2ec3b", 199, "8ef011b01b95c7a5"),
    "value-180-2": (180, "099d93eb3c728e70", 204, "9cbd78b77bc46217"),
    "value-180-3": (180, "c196dca8eb300690", 201, "e4ad4a1bc6f192c0"),
    "value-180-4": (180, "63ae59689bdffe4f", 204, "abc92c9c4250a8d9"),
    "value-180-5": (180, "90d2592428662ca3", 194, "8d9660733af5f9ec"),
    "value-180-6": (180, "481814ec0982f246", 204, "222c9ab1009b245f"),
    "value-180-7": (180, "dc85ee28513416a1", 204, "b6baa1748a015aad"),
    "text-1800": (1800, "7238472b524b11f3", 1633, "3854bf0b59bc30b0"),
    "text-3600": (3600, "5d6757ff8db8cfae", 2905, "57951c214723368e"),
    "text-8192": (8192, "88d7272f59069c38", 5291, "764a07a338708d24"),
    "text-8193": (8193, "b2db7145226c825b", 5266, "6f5ee1ed3a542083"),
    "text-32768": (32768, "3ae22972864843ba", 16757, "5a4490df4fa268e4"),
    "text-40000": (40000, "5fa66035f7784935", 22302, "fb5ac27aa36d3709"),
    "text-70000": (70000, "ab30b6abec6a19ee", 37148, "cc29a491f603a99b"),
    "v0-inner-1": (214, "62debc0c05bcf132", 228, "7201849b7ea055be"),
    "v0-inner-10": (2140, "826f51d995a02edb", 1839, "a46ddfb654aec88f"),
    "v0-inner-60": (12840, "b182c1ad122b4c71", 7654, "f445d222eef2d46f"),
    "v1-inner-1": (222, "aca34ec2af2b25db", 237, "13cfc349529cc428"),
    "v1-inner-10": (2220, "544657541f55bf1e", 1874, "768ac0fbe9be546f"),
    "v1-inner-60": (13320, "323e5221557ebe3e", 7909, "d0c0f08b9cb5c0a8"),
}
