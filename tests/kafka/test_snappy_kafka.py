"""lazyconv's snappy streams against Kafka's own writer, run live: ``SnappyReference.java``
(beside this file) compresses the same bytes through ``Compression.snappy().wrapForOutput`` of
each distribution's kafka-clients and snappy-java, and lazyconv's ``compress`` must give the
same bytes with the kernel and with the pure-Python reference, for data from empty to several
32 KiB blocks, compressible or not, with and around the sizes where snappy's hash table grows.
tests/records/test_snappy.py pins the same comparison on fixed inputs without Java."""

from __future__ import annotations

import platform
import random
from pathlib import Path

import pytest
from java_reference import run_java_reference
from lz4_parity import text
from snappy_parity import inputs as parity_inputs

from lazyconv.records import _impl
from lazyconv.records._compression import Compression, compress

pytestmark = [
    pytest.mark.kafka,
    # snappy-java's macOS arm64 library hashes with the CPU's CRC32 instructions: other (valid)
    # bytes than every other platform's, which lazyconv writes (docs/kernel.md)
    pytest.mark.skipif(platform.system() == "Darwin" and platform.machine() == "arm64",
                       reason="snappy-java on Apple silicon writes other snappy bytes than on Linux"),
]

SOURCE = Path(__file__).with_name("SnappyReference.java")


def inputs() -> dict[str, bytes]:
    rng = random.Random(2026)
    found = dict(parity_inputs())
    for index in range(120):  # what down-conversion compresses most: small message sets
        size = rng.choice([rng.randint(1, 400), rng.randint(400, 9000), rng.randint(9000, 70000)])
        kind = index % 4
        if kind == 0:
            value = text(size, b"live%d" % index)
        elif kind == 1:
            value = rng.randbytes(size)
        elif kind == 2:
            value = bytes(rng.choice(b"abcd") for _ in range(size))
        else:
            value = (rng.randbytes(rng.randint(1, 60)) * (size // 2 + 1))[:size]
        found[f"random-{index}-{size}"] = value
    found["zeros-300k"] = bytes(300_000)
    return found


@pytest.fixture(scope="module", params=["3", "4"])
def kafka_snappy(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    dist: Path = request.getfixturevalue("kafka_dist_3" if request.param == "3" else "kafka_dist")
    data = inputs()
    files = run_java_reference(dist, SOURCE, tmp_path_factory.mktemp(f"snappy-{request.param}"), data)
    return data, {name: Path(f"{path}.snappy").read_bytes() for name, path in files.items()}


@pytest.mark.parametrize("twin", ["native", "python"])
def test_snappy_streams_equal_kafkas(kafka_snappy, twin: str) -> None:
    if twin == "native" and _impl.NATIVE is None:
        pytest.skip("compiled kernel not in use")
    data, streams = kafka_snappy
    differ = []
    with _impl.using(_impl.NATIVE if twin == "native" else _impl.REFERENCE):
        for name, value in data.items():
            ours = compress(Compression.SNAPPY, value, 1)
            if ours != streams[name]:
                differ.append(f"{name}: lazyconv {len(ours)} bytes, Kafka {len(streams[name])}")
    assert not differ, differ
