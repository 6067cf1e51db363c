"""lazyconv's lz4 output against Kafka's own, in bytes (issue 25: lz4 at parity with Kafka).

Two measurements, both against a Kafka distribution (``--dist``, default ``$LAZYCONV_KAFKA_DIST_3``):

- **frames**: the same uncompressed bytes compressed by Kafka's writer (``Compression.lz4()``,
  lz4-java 1.8.0, driven by ``tests/kafka/Lz4Reference.java``), by lazyconv
  (``records.compression.compress``) and by python-lz4's block API, which lazyconv used before
  (``lz4.block.compress`` per 64 KiB block, framed the same way), for several kinds of data: the
  magic-1 inner message set of a down-converted wrapper and the records section of a v2 batch,
  each of 1 KiB JSON-like values, 100-byte values and word-salad text.
- **broker** (``--broker``): a Kafka 3.x broker down-converting lz4 data for Fetch v2 (magic 1):
  a topic written by a confluent-kafka producer (librdkafka's lz4), read with raw Fetch v2
  requests (Kafka's wrappers) and with Fetch v4 (the stored v2 batches), which lazyconv's
  ``down_convert`` converts as ``lazyconv serve`` would: the wrappers' total size and each one's
  inner messages compared.

    python bench/lz4_vs_kafka.py [--dist DIR] [--broker] [--records 20000] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import lz4.block  # noqa: E402

from lazyconv.conversion._down import down_convert  # noqa: E402
from lazyconv.records import MemoryRecords, RecordsBuilder  # noqa: E402
from lazyconv.records._compression import Compression, compress, decompress  # noqa: E402

LZ4 = Compression.LZ4
JAVA_SOURCE = REPO / "tests" / "kafka" / "Lz4Reference.java"


def python_lz4_frame(data: bytes, magic: int) -> bytes:
    """The frame lazyconv wrote before: python-lz4's block API per 64 KiB block."""
    frame = bytearray(compress(LZ4, b"", magic)[:-4])  # Kafka's 7-byte header
    for start in range(0, len(data), 65536):
        piece = data[start : start + 65536]
        block = lz4.block.compress(piece, store_size=False)
        if len(block) >= len(piece):
            frame += struct.pack("<I", len(piece) | 0x80000000) + piece
        else:
            frame += struct.pack("<I", len(block)) + block
    return bytes(frame + b"\x00\x00\x00\x00")


def values(kind: str, count: int, rng: random.Random) -> list[bytes]:
    words = [bytes(rng.choices(range(97, 123), k=rng.randint(2, 9))) for _ in range(512)]
    out = []
    for i in range(count):
        if kind == "json-1k":
            fields = []
            while sum(len(f) for f in fields) < 1100:
                key = rng.choice(words).decode()
                value = (f'"{rng.choice(words).decode()}-{rng.getrandbits(20)}"'
                         if rng.random() < 0.6 else str(rng.getrandbits(24)))
                fields.append(f'"{key}":{value}')
            out.append(('{"seq":' + str(i) + "," + ",".join(fields) + "}").encode()[:1024])
        else:
            size = 100 if kind == "text-100" else 1024
            text = bytearray()
            while len(text) < size:
                text += rng.choice(words) + b" "
            out.append(bytes(text[:size]))
    return out


def frame_inputs() -> dict[str, tuple[bytes, int]]:
    """name -> (uncompressed bytes, frame magic)."""
    rng = random.Random(25)
    found: dict[str, tuple[bytes, int]] = {}
    for kind, count in (("json-1k", 200), ("text-1k", 200), ("text-100", 2000)):
        batch_values = values(kind, count, rng)
        builder = RecordsBuilder(2, LZ4)
        for i, value in enumerate(batch_values):
            builder.append(i, 1_700_000_000_000 + i, b"key-%012d" % i, value)
        batch = builder.build()
        found[f"{kind} v2 records"] = (decompress(LZ4, batch[61:], 2), 2)
        found[f"{kind} v1 inner"] = (_inner_set(batch), 1)
    return found


def _inner_set(batch: bytes) -> bytes:
    """The inner message set of the one magic-1 wrapper ``batch`` down-converts to."""
    raw = bytes(down_convert(MemoryRecords(batch).batches(), 1, 0).records.buffer)
    assert int.from_bytes(raw[8:12], "big") + 12 == len(raw), "one wrapper"
    pos = 8 + 4 + 4 + 1 + 1 + 8
    key_len = int.from_bytes(raw[pos : pos + 4], "big", signed=True)
    pos += 4 + max(key_len, 0)
    value_len = int.from_bytes(raw[pos : pos + 4], "big", signed=True)
    return decompress(LZ4, raw[pos + 4 : pos + 4 + value_len], 1)


def java_frames(dist: Path, inputs: dict[str, tuple[bytes, int]], work: Path) -> dict[str, bytes]:
    build = work / "classes"
    build.mkdir(exist_ok=True)
    classpath = f"{dist}/libs/*"
    subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(build), str(JAVA_SOURCE)], check=True)
    files: dict[str, Path] = {}
    for index, (name, (data, _magic)) in enumerate(inputs.items()):
        files[name] = work / f"in{index}"
        files[name].write_bytes(data)
    for magic in sorted({m for _, m in inputs.values()}):
        names = [n for n, (_, m) in inputs.items() if m == magic]
        subprocess.run(["java", "-cp", f"{build}:{classpath}", "Lz4Reference", "9", str(magic),
                        *(str(files[n]) for n in names)], check=True)
    return {n: Path(f"{files[n]}.L9.M{m}.lz4").read_bytes() for n, (_, m) in inputs.items()}


def measure_frames(dist: Path) -> list[dict[str, object]]:
    inputs = frame_inputs()
    with tempfile.TemporaryDirectory() as tmp:
        kafka = java_frames(dist, inputs, Path(tmp))
    rows = []
    for name, (data, magic) in inputs.items():
        ours = compress(LZ4, data, magic)
        before = python_lz4_frame(data, magic)
        rows.append({"input": name, "bytes": len(data), "kafka": len(kafka[name]),
                     "lazyconv": len(ours), "identical": ours == kafka[name],
                     "python_lz4_block": len(before),
                     "lazyconv_pct": 100 * (len(ours) / len(kafka[name]) - 1),
                     "python_lz4_pct": 100 * (len(before) / len(kafka[name]) - 1)})
    return rows


# -- the broker's down-conversion ---------------------------------------------------------------


def _fetch(port: int, version: int, topic: str, offset: int, max_bytes: int) -> tuple[bytes, int]:
    from lazyconv.protocol._fetch import FetchRequest, FetchResponse, response_header_version
    from lazyconv.protocol._headers import decode_response_header
    from lazyconv.protocol._primitives import Reader

    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes,
            "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": max_bytes}]}]}
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(FetchRequest.encode_framed(version, body, 1, "lz4-bench"))
        size = int.from_bytes(_recv(sock, 4), "big")
        frame = _recv(sock, size)
    reader = Reader(frame)
    decode_response_header(reader, response_header_version(version))
    answer = FetchResponse.decode(version, memoryview(frame)[reader.pos:])
    (part,) = answer["responses"][0]["partitions"]
    if part["error_code"]:
        raise RuntimeError(f"Fetch v{version} error {part['error_code']}")
    return bytes(part["records"] or b""), part["high_watermark"]


def _recv(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        piece = sock.recv(n - len(data))
        if not piece:
            raise ConnectionError("closed")
        data += piece
    return bytes(data)


def _complete(data: bytes) -> tuple[bytes, int]:
    """The complete entries at the start of ``data`` and the offset after the last one (legacy
    wrappers carry their last inner offset; v2 batches their base offset + last delta)."""
    pos, after = 0, 0
    while pos + 12 <= len(data):
        offset, size = struct.unpack_from(">qi", data, pos)
        if pos + 12 + size > len(data):
            break
        magic = data[pos + 16]
        after = offset + struct.unpack_from(">i", data, pos + 23)[0] + 1 if magic == 2 else offset + 1
        pos += 12 + size
    return data[:pos], after


def measure_broker(dist: Path, records: int) -> dict[str, object]:
    from kafka_broker import KafkaBroker, create_topic, produce_records

    rng = random.Random(7)
    pool = values("json-1k", 512, rng)
    work = Path(tempfile.mkdtemp(prefix="lz4-vs-kafka-"))
    broker = KafkaBroker(dist, work / "broker")
    broker.start()
    try:
        create_topic(broker.bootstrap, "lz4", partitions=1)
        produce_records(broker.bootstrap, "lz4",
                        ((0, b"key-%012d" % i, pool[i % len(pool)], None, None) for i in range(records)),
                        "lz4", config={"linger.ms": 20, "batch.size": 65536})
        port = int(broker.bootstrap.rsplit(":", 1)[1])
        kafka_wrappers, stored, offset = bytearray(), bytearray(), 0
        while True:
            data, high = _fetch(port, 2, "lz4", offset, 1 << 20)
            chunk, nxt = _complete(data)
            if not chunk:
                break
            kafka_wrappers += chunk
            offset = nxt
            if offset >= high:
                break
        offset = 0
        while True:
            data, high = _fetch(port, 4, "lz4", offset, 1 << 20)
            chunk, nxt = _complete(data)
            if not chunk:
                break
            stored += chunk
            offset = nxt
            if offset >= high:
                break
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    ours = bytes(down_convert(MemoryRecords(bytes(stored)).batches(), 1, 0).records.buffer)
    same_records = ([(r.offset, r.key, r.value) for r in MemoryRecords(ours).records()]
                    == [(r.offset, r.key, r.value) for r in MemoryRecords(bytes(kafka_wrappers)).records()])
    return {"records": records, "stored_v2_bytes": len(stored), "kafka_v1_bytes": len(kafka_wrappers),
            "lazyconv_v1_bytes": len(ours), "identical": ours == bytes(kafka_wrappers),
            "same_records": same_records,
            "lazyconv_pct": 100 * (len(ours) / len(kafka_wrappers) - 1),
            "sha256_kafka": hashlib.sha256(kafka_wrappers).hexdigest()[:16],
            "sha256_lazyconv": hashlib.sha256(ours).hexdigest()[:16]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dist", type=Path, default=os.environ.get("LAZYCONV_KAFKA_DIST_3"),
                        help="a Kafka 3.x distribution (default $LAZYCONV_KAFKA_DIST_3)")
    parser.add_argument("--broker", action="store_true",
                        help="also measure a broker's down-conversion (starts one)")
    parser.add_argument("--records", type=int, default=20000, help="records for --broker")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args(argv)
    if not args.dist:
        parser.error("no Kafka distribution: pass --dist or set LAZYCONV_KAFKA_DIST_3")
    result: dict[str, object] = {"frames": measure_frames(args.dist)}
    if args.broker:
        result["broker"] = measure_broker(args.dist, args.records)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print("| input | bytes | Kafka (lz4-java) | lazyconv | lazyconv vs Kafka | python-lz4 block | python-lz4 vs Kafka |")
    print("|---|---|---|---|---|---|---|")
    for row in result["frames"]:  # type: ignore[union-attr]
        same = " (identical)" if row["identical"] else ""
        print(f"| {row['input']} | {row['bytes']:,} | {row['kafka']:,} | {row['lazyconv']:,} | "
              f"{row['lazyconv_pct']:+.2f} %{same} | {row['python_lz4_block']:,} | {row['python_lz4_pct']:+.2f} % |")
    if args.broker:
        b = result["broker"]
        print()
        print(f"Kafka {args.dist.name} down-converting {b['records']:,} lz4 records for Fetch v2: "  # type: ignore[index]
              f"Kafka {b['kafka_v1_bytes']:,} bytes, lazyconv {b['lazyconv_v1_bytes']:,} "  # type: ignore[index]
              f"({b['lazyconv_pct']:+.2f} %), identical bytes: {b['identical']}, "  # type: ignore[index]
              f"same records: {b['same_records']}")  # type: ignore[index]
    return 0


if __name__ == "__main__":
    sys.exit(main())
