"""A segment truncated under the server: its entry index follows the file down."""

from __future__ import annotations

from lazyconv.records import RecordsBuilder
from lazyconv.serve import LogDirectory
from tests.net.test_robustness import wait_for
from tests.serve.test_e2e_errors_and_librdkafka import fetch_raw


def batches(count: int) -> list[bytes]:
    out = []
    for i in range(count):
        builder = RecordsBuilder(2, base_offset=2 * i)
        builder.append(offset=2 * i, timestamp=1, value=b"a")
        builder.append(offset=2 * i + 1, timestamp=1, value=b"b")
        out.append(builder.build())
    return out


def test_a_truncated_segment_drops_its_stale_entries(serve_logdir, tmp_path):
    data = batches(3)
    (tmp_path / "t-0").mkdir()
    segment = tmp_path / "t-0" / f"{0:020d}.log"
    segment.write_bytes(b"".join(data))
    plog = LogDirectory(tmp_path).partition("t", 0)
    assert plog.high_watermark == 6
    with open(segment, "r+b") as f:
        f.truncate(len(data[0]) + 10)  # the first batch and a piece of the second
    plog.refresh()
    assert plog.high_watermark == 2
    assert [e.last_offset for _s, e in plog.entries()] == [1]
    segment.write_bytes(b"".join(data))  # and it grows again
    plog.refresh()
    assert plog.high_watermark == 6


def test_fetches_after_truncation_are_answered(serve_logdir, tmp_path):
    data = batches(3)
    (tmp_path / "t-0").mkdir()
    segment = tmp_path / "t-0" / f"{0:020d}.log"
    segment.write_bytes(b"".join(data))
    server = serve_logdir(tmp_path)
    assert fetch_raw(server.port, 4, "t", 0)["responses"][0]["partitions"][0]["high_watermark"] == 6
    with open(segment, "r+b") as f:
        f.truncate(len(data[0]))
    for version in (1, 4):
        part = fetch_raw(server.port, version, "t", 0)["responses"][0]["partitions"][0]
        assert part["error_code"] == 0 and part["high_watermark"] == 2
    beyond = fetch_raw(server.port, 4, "t", 0, offset=4)["responses"][0]["partitions"][0]
    assert beyond["error_code"] == 1  # OFFSET_OUT_OF_RANGE, not a closed connection


def test_a_segment_deleted_under_the_server_is_a_storage_error(serve_logdir, tmp_path):
    data = batches(2)
    for p in (0, 1):
        (tmp_path / f"t-{p}").mkdir()
        (tmp_path / f"t-{p}" / f"{0:020d}.log").write_bytes(b"".join(data))
    server = serve_logdir(tmp_path)
    assert fetch_raw(server.port, 6, "t", 0)["responses"][0]["partitions"][0]["error_code"] == 0
    (tmp_path / "t-0" / f"{0:020d}.log").unlink()
    cache = server.server.handler.segment_files
    # nothing cached (an open descriptor would still read the unlinked file, as on any Unix):
    # the next read must open it; the first response may still be giving its descriptor back
    assert wait_for(lambda: (cache.close(), cache.open_files == 0)[1])
    gone = fetch_raw(server.port, 6, "t", 0)["responses"][0]["partitions"][0]
    assert gone["error_code"] == 56  # KAFKA_STORAGE_ERROR, not a closed connection
    other = fetch_raw(server.port, 6, "t", 1)["responses"][0]["partitions"][0]
    assert other["error_code"] == 0 and bytes(other["records"]) == b"".join(data)
