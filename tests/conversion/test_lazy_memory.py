"""Memory is the point of the lazy send: peak traced memory (tracemalloc) while sending a
file-backed input of 64 MiB stays under a small multiple of the chunk size plus the largest
batch, while the eager conversion grows with the input.

Bound asserted for the lazy send: ``4 * chunk_size + 2 * largest batch + 1 MiB``. Where it
comes from: one chunk of input batches (<= chunk_size) read from the file, its converted output
(about the same size) while being built and once as bytes, the first converted batch, and
fixed overhead (interpreter objects, the padding step buffer <= 128 KiB).
"""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import pytest
from lazy_support import build_batch

from lazyconv._send import drain
from lazyconv.conversion._down import down_convert
from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.records import FileRecords

MiB = 1024 * 1024
INPUT_SIZE = 64 * MiB
CHUNK_SIZE = 128 * 1024


class _NullChannel:
    """Counts bytes and keeps none of them."""

    def __init__(self) -> None:
        self.count = 0

    def write(self, data: memoryview | bytes) -> int:
        self.count += len(data)
        return len(data)


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A 64 MiB segment of uncompressed v2 batches (100 records of 600 bytes each, about
    62 KiB per batch), written by repeating one batch with rising base offsets (the base
    offset is outside the v2 CRC)."""
    template = build_batch(
        2, [(1_700_000_000_000 + i, b"key-%03d" % i, bytes([i % 256]) * 600) for i in range(100)]
    )
    path = tmp_path_factory.mktemp("memory") / "00000000000000000000.log"
    count = INPUT_SIZE // len(template) + 1
    with open(path, "wb") as out:
        batch = bytearray(template)
        for n in range(count):
            struct.pack_into(">q", batch, 0, n * 100)
            out.write(batch)
    return path, len(template)


def _peak(fn) -> tuple[int, object]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, result


@pytest.mark.slow
def test_lazy_send_memory_is_bounded_by_the_chunk_size(big_log: tuple[Path, int]) -> None:
    path, largest_batch = big_log
    with FileRecords.open(path) as records:
        assert records.size_in_bytes >= INPUT_SIZE

        def lazy_run() -> tuple[int, int]:
            lazy = LazyDownConvertedRecords(records, 1, 0, chunk_size=CHUNK_SIZE)
            channel = _NullChannel()
            drain(lazy.to_send(), channel)
            return channel.count, lazy.stats.records_converted

        lazy_peak, (sent, converted) = _peak(lazy_run)
        assert sent == records.size_in_bytes
        assert converted > 100_000  # v2 → v1 shrinks here, so every record went out

        def eager_run() -> int:
            return down_convert(records.batches(), 1, 0).records.size_in_bytes

        eager_peak, eager_size = _peak(eager_run)

    bound = 4 * CHUNK_SIZE + 2 * largest_batch + MiB
    print(f"lazy peak {lazy_peak / MiB:.2f} MiB (bound {bound / MiB:.2f} MiB), "
          f"eager peak {eager_peak / MiB:.1f} MiB for {INPUT_SIZE / MiB:.0f} MiB of input")
    assert lazy_peak < bound
    assert eager_peak > eager_size >= INPUT_SIZE // 2  # eager holds the whole output
    assert eager_peak > 20 * lazy_peak


class _StallingChannel:
    """Takes everything until ``limit`` bytes were written, then nothing: a reader that
    stopped reading, as a full socket buffer looks to the send."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    def write(self, data: memoryview | bytes) -> int:
        n = max(0, min(len(data), self.limit - self.count))
        self.count += n
        return n


class _ServeSegment:
    """Serve's records of a whole segment, with the descriptor cache they read through."""

    def __init__(self, path: Path) -> None:
        from lazyconv.serve._segment_files import CachedFileRecords, SegmentFileCache

        self.files = SegmentFileCache(4)
        self.records = CachedFileRecords(self.files, path, 0, path.stat().st_size)

    def close(self) -> None:
        self.records.close()
        self.files.close()


def _file_records(path: Path) -> tuple[FileRecords, FileRecords]:
    records = FileRecords.open(path)
    return records, records


def _serve_segment(path: Path) -> tuple[FileRecords, _ServeSegment]:
    segment = _ServeSegment(path)
    return segment.records, segment


@pytest.mark.parametrize("opener", [_file_records, _serve_segment], ids=["FileRecords", "serve"])
def test_a_send_waiting_for_its_reader_holds_one_chunk(big_log: tuple[Path, int], opener) -> None:
    """What a slow consumer costs between two chunks: the converted chunk being written, and
    not also the window of input it was converted from (a skipped first batch once kept that
    window alive: about a chunk more per waiting connection)."""
    path, _ = big_log
    records, owner = opener(path)
    try:
        tracemalloc.start()
        try:
            lazy = LazyDownConvertedRecords(records, 1, 0, chunk_size=CHUNK_SIZE)
            lazy.release_first_batch()  # as serve does: the send converts the first batch again
            send = lazy.to_send()
            channel = _StallingChannel(5 * CHUNK_SIZE + 1000)  # the reader stops mid-chunk
            for _ in range(100):
                if send.write_to(channel) == 0:
                    break
            held, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert channel.count == channel.limit and not send.completed
        # one converted chunk (a little over CHUNK_SIZE: v1 messages of these records are about
        # as large as the v2 records) and interpreter objects; a kept window adds CHUNK_SIZE,
        # with or without the kernel
        assert held < 1.5 * CHUNK_SIZE, f"{held} bytes held between chunks"
    finally:
        owner.close()


class _ReadLog:
    """Every ``(position, size)`` read through a source class's ``read``, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, source_class: type) -> None:
        self.reads: list[tuple[int, int]] = []
        original = source_class.read

        def read(source: object, position: int, size: int) -> object:
            self.reads.append((position, size))
            return original(source, position, size)

        monkeypatch.setattr(source_class, "read", read)


@pytest.mark.parametrize("opener", [_file_records, _serve_segment], ids=["FileRecords", "serve"])
@pytest.mark.parametrize("kept", [True, False], ids=["first-batch-kept", "from-state"])
@pytest.mark.parametrize("first_batch", [0, 3])
def test_a_send_reads_the_first_batch_once(big_log: tuple[Path, int], opener, kept: bool,
                                            first_batch: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the send's first converted batch F is made, the chunks after it start where F's
    batch ends: nothing before that is read again (a window of a chunk was once read there
    just to step over F: a tenth more reading for a 1 MiB response of 64 KiB batches)."""
    from lazyconv.records import _impl
    from lazyconv.records._file import _FileSource
    from lazyconv.serve._segment_files import _CachedSource

    path, batch_size = big_log
    records, owner = opener(path)
    try:
        size = 16 * batch_size  # a 1 MiB response's worth of whole batches
        start = first_batch * batch_size  # file positions: a range not at the file's start too
        if opener is _file_records:
            part = records.slice(start, size)
        else:
            from lazyconv.serve._segment_files import CachedFileRecords
            part = CachedFileRecords(owner.files, path, start, start + size)
        lazy = LazyDownConvertedRecords(part, 1, 0, chunk_size=CHUNK_SIZE)
        if not kept:  # as a sender process rebuilds it: F is converted again by the send
            lazy = LazyDownConvertedRecords.from_state(part, 1, 0, lazy.committed_state, CHUNK_SIZE)
        log = _ReadLog(monkeypatch, _FileSource if opener is _file_records else _CachedSource)
        channel = _NullChannel()
        drain(lazy.to_send(), channel)
        assert channel.count == lazy.size_in_bytes
        # with the kernel the batch in one read (the committed state carries its size), else
        # its header, then the batch
        first_batch_reads = 0 if kept else 1 if _impl.current.converts_runs else 2
        after = log.reads[first_batch_reads:]
        assert after and all(position >= start + batch_size for position, _ in after), log.reads[:4]
        assert all(start <= position < start + batch_size for position, _ in log.reads[:first_batch_reads])
        # each window reads a batch header past its chunk, and a little more (the 128 KiB
        # chunks here hold two batches): 1.06x; a window read again over F made it 1.19x
        assert sum(n for _, n in log.reads) < 1.1 * size
    finally:
        owner.close()


@pytest.mark.parametrize("hint_error", [0, -1, 1, None], ids=["exact", "short", "long", "no-hint"])
@pytest.mark.parametrize("first_offset", [0, 50])
def test_a_first_batch_size_hint_reads_it_once_and_changes_nothing_else(
        big_log: tuple[Path, int], hint_error: int | None, first_offset: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that knows the first batch's size from its index (``first_batch_size``) has F
    read in one step and, with the kernel, converted in one call; a wrong size costs only the
    batch-by-batch path. Either way the committed size, every byte sent, the stats and the
    committed state (which carries the size to a sender process) are those without the hint."""
    from lazyconv.records import _impl
    from lazyconv.records._file import _FileSource

    path, batch_size = big_log
    records, owner = _file_records(path)
    try:
        part = records.slice(batch_size, 8 * batch_size)
        reference = LazyDownConvertedRecords(part, 1, first_offset + 100)  # the part starts at 100
        log = _ReadLog(monkeypatch, _FileSource)
        hint = None if hint_error is None else batch_size + hint_error
        hinted = LazyDownConvertedRecords(part, 1, first_offset + 100, first_batch_size=hint)
        kernel = _impl.current.converts_runs
        # one read with an exact hint; a wrong one is read, then the batch's header and the
        # batch as without a hint (and without the kernel)
        expected = 2 if hint is None or not kernel else 1 if hint_error == 0 else 3
        assert len(log.reads) == expected, log.reads
        assert hinted.size_in_bytes == reference.size_in_bytes
        assert hinted.committed_state == reference.committed_state
        assert hinted.committed_state.first_batch_size == batch_size
        for lazy in (reference, hinted):
            lazy.release_first_batch()  # the send converts F again, as a sender process does
        sent = [_drained(lazy) for lazy in (reference, hinted)]
        assert sent[0] == sent[1]
        assert reference.stats.records_converted == hinted.stats.records_converted > 0
        assert reference.stats.temporary_memory_bytes == hinted.stats.temporary_memory_bytes
    finally:
        owner.close()


def _drained(lazy: LazyDownConvertedRecords) -> bytes:
    out = bytearray()

    class _Keep:
        def write(self, data: memoryview | bytes) -> int:
            out.extend(data)
            return len(data)

    drain(lazy.to_send(), _Keep())
    return bytes(out)


def test_a_compressed_first_batch_gives_a_sender_no_size_to_read_it_by(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Only an uncompressed first batch is worth reading in one step: the committed state
    carries no size for a compressed one, so a sender rebuilding the send reads it as before
    (its header first), not once more in one step before that."""
    from lazyconv.records import Compression
    from lazyconv.records._file import _FileSource

    batch = build_batch(2, [(1, b"k", b"v" * 2000) for _ in range(20)], compression=Compression.GZIP)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(batch * 3)
    records = FileRecords.open(path)
    try:
        lazy = LazyDownConvertedRecords(records, 1, 0)
        assert lazy.committed_state.first_batch_size is None
        rebuilt = LazyDownConvertedRecords.from_state(records, 1, 0, lazy.committed_state)
        log = _ReadLog(monkeypatch, _FileSource)
        drain(rebuilt.to_send(), _NullChannel())
        # the header first (then the batch, once or, for the conversion cache, as its copy), not
        # the whole batch in one step before that
        assert log.reads[0] == (0, 61), log.reads
    finally:
        records.close()
