"""``lazyconv dump --print-data-log`` decodes keys, values and header keys as Kafka's tool does:
``new String(bytes, UTF_8)`` (its StringDecoder, and the header keys of its record reader), whose
replacement of malformed input is Java's, not Python's ``errors="replace"``.

The expected strings were printed by OpenJDK 17's ``new String(bytes, StandardCharsets.UTF_8)``
(the JDK Kafka 3.9 and 4.0 run on here); ``tests/kafka/test_dump_kafka.py`` compares the whole
listing with Kafka's tool on the same bytes.
"""

from __future__ import annotations

import pytest

from lazyconv._commands._dump_lines import java_utf8

R = "\ufffd"

JAVA_17 = [
    # valid UTF-8: the same in both
    (b"", ""),
    (b"abc", "abc"),
    ("h\u00e9 \u20ac \U0001f600".encode(), "h\u00e9 \u20ac \U0001f600"),
    # a UTF-8 encoded surrogate is one replacement for its three bytes (Python: three)
    (b"\xed\xa0\x80", R),
    (b"a\xed\xbf\xbfb", f"a{R}b"),
    # a surrogate's first two bytes, cut by the end or by another byte: one (Python: two)
    (b"a\xed\xa0", f"a{R}"),
    (b"\xed\xa0A", f"{R}A"),
    (b"\xed\xa0\xed\xa0\x80", f"{R}{R}"),
    # where both agree
    (b"\xff\xfe", f"{R}{R}"),
    (b"\xc0\x80", f"{R}{R}"),
    (b"\xe0\x80\x80", f"{R}{R}{R}"),
    (b"\xe1\x80", R),
    (b"\xe1\x80A", f"{R}A"),
    (b"\xf0\x90\x80", R),
    (b"\xf0\x90\x80A", f"{R}A"),
    (b"\xf0\x90A", f"{R}A"),
    (b"\xf4\x90\x80\x80", f"{R}{R}{R}{R}"),
    (b"\xf5\x80\x80\x80", f"{R}{R}{R}{R}"),
    (b"\xf8\x88\x80\x80\x80", R * 5),
    (b"\x80", R),
]


@pytest.mark.parametrize(("data", "java"), JAVA_17, ids=[d.hex() or "empty" for d, _ in JAVA_17])
def test_malformed_utf8_is_replaced_as_java_replaces_it(data: bytes, java: str) -> None:
    assert java_utf8(data) == java
