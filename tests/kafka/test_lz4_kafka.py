"""lazyconv's lz4 frames against Kafka's own writer, run live: ``Lz4Reference.java`` (beside
this file) compresses the same bytes through ``Compression.lz4().level(L).wrapForOutput`` of
each distribution's kafka-clients and lz4-java, and lazyconv's ``compress`` must give the same
bytes, for every level Kafka accepts that behaves differently, every magic (magic 0 keeps
Kafka's broken header checksum) and data from empty to several blocks, compressible or not.
tests/records/test_lz4_parity.py pins the same comparison on fixed inputs without Java."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest
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
    javac, java = shutil.which("javac"), shutil.which("java")
    if not javac or not java:
        pytest.fail("the lz4 reference needs java and javac (a JDK 17)", pytrace=False)
    work = tmp_path_factory.mktemp(f"lz4-{request.param}")
    classpath = f"{dist}/libs/*"
    subprocess.run([javac, "-nowarn", "-cp", classpath, "-d", str(work), str(SOURCE)], check=True)
    data = inputs()
    files = {}
    for index, (name, value) in enumerate(data.items()):
        files[name] = work / f"in{index}"
        files[name].write_bytes(value)
    subprocess.run([java, "-cp", f"{work}:{classpath}", "Lz4Reference", ",".join(map(str, LEVELS)),
                    "0,1,2", *map(str, files.values())], check=True, timeout=300)

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
