"""lazyconv's lz4 frames against Kafka's own writer, run live: ``Lz4Reference.java`` (beside
this file) compresses the same bytes through ``Compression.lz4().level(L).wrapForOutput`` of
each distribution's kafka-clients and lz4-java, and lazyconv's ``compress`` must give the same
bytes, for every level Kafka accepts that behaves differently, every magic (magic 0 keeps
Kafka's broken header checksum) and data from empty to several blocks, compressible or not.
tests/records/test_lz4_parity.py pins the same comparison on fixed inputs without Java."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from java_reference import run_java_reference
from lz4_parity import inputs as parity_inputs

from lazyconv.records._compression import Compression, compress

pytestmark = pytest.mark.kafka

SOURCE = Path(__file__).with_name("Lz4Reference.java")
LEVELS = (9, 1, 4, 12, 17)


def inputs() -> dict[str, bytes]:
    rng = random.Random(2025)
    found = dict(parity_inputs())
    found.update({
        "empty": b"",
        "one-byte": b"x",
        "random-64k": rng.randbytes(65536),
        "random-then-text": rng.randbytes(70000) + found["text-200k"][:70000],
        "zeros-300k": bytes(300_000),
        "block-edge": found["text-200k"][:65537],
        "block-edge-1": found["text-200k"][:65535],
        "1m": (found["text-200k"] * 6)[:1 << 20],
    })
    return found


@pytest.fixture(scope="module", params=["3", "4"])
def kafka_lz4(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    dist: Path = request.getfixturevalue("kafka_dist_3" if request.param == "3" else "kafka_dist")
    data = inputs()
    files = run_java_reference(dist, SOURCE, tmp_path_factory.mktemp(f"lz4-{request.param}"), data,
                               ",".join(map(str, LEVELS)), "0,1,2")

    def frame(name: str, level: int, magic: int) -> bytes:
        return Path(f"{files[name]}.L{level}.M{magic}.lz4").read_bytes()

    return data, frame


@pytest.mark.parametrize("level", LEVELS)
def test_lz4_frames_equal_kafkas(kafka_lz4, level: int) -> None:
    data, frame = kafka_lz4
    differ = []
    for name, value in data.items():
        for magic in (0, 1, 2):
            ours, theirs = compress(Compression.LZ4, value, magic, level), frame(name, level, magic)
            if ours != theirs:
                differ.append(f"{name} magic {magic}: lazyconv {len(ours)} bytes, Kafka {len(theirs)}")
    assert not differ, differ
