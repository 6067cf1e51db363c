"""FileRecords: headers via positioned reads only, lazy batch bytes, slices, sends."""

from __future__ import annotations

import io
import os
import struct
import types
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyconv.errors import ConfigurationError, TruncatedDataError, UnknownMagicError
from lazyconv.records import FileRecords, MemoryRecords, RecordsBuilder


def batch(base: int, n: int, value_size: int = 10) -> bytes:
    b = RecordsBuilder(2, base_offset=base)
    for i in range(n):
        b.append(base + i, 1000 + i, b"k%d" % i, bytes([i % 256]) * value_size)
    return b.build()


def test_batches_read_only_headers_of_a_huge_sparse_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    first = batch(0, 3) + batch(3, 2, value_size=4 << 20)  # a 4 MiB batch in the middle
    claimed = 1 << 30
    huge_header = bytearray(batch(5, 1)[:61])
    struct.pack_into(">i", huge_header, 8, claimed - 12)
    with open(path, "wb") as f:
        f.write(first)
        f.write(huge_header)
        f.truncate(len(first) + claimed)  # sparse: 1 GiB that is never read
    with FileRecords.open(path) as records:
        assert records.size_in_bytes == len(first) + claimed
        batches = list(records.batches())
        assert [b.base_offset for b in batches] == [0, 3, 5]
        assert batches[2].size_in_bytes == claimed
        assert records.bytes_read <= 3 * 61
        # iterating a batch loads exactly that batch
        before = records.bytes_read
        assert [r.offset for r in batches[0]] == [0, 1, 2]
        assert records.bytes_read - before == batches[0].size_in_bytes - 61
        assert batches[1].is_valid()


def test_slice_positions_partial_tail_and_send(tmp_path: Path) -> None:
    data = batch(0, 3) + batch(3, 3) + batch(6, 3)
    size = len(batch(0, 3))
    path = tmp_path / "seg.log"
    path.write_bytes(data)
    with FileRecords.open(path) as records:
        sliced = records.slice(size, size + size // 2)  # second batch whole, third cut in half
        assert sliced.size_in_bytes == size + size // 2
        got = list(sliced.batches())
        assert [(b.position, b.base_offset) for b in got] == [(size, 3)]
        assert [r.offset for r in sliced.records()] == [3, 4, 5]
        assert sliced.to_send().to_bytes() == data[size : 2 * size + size // 2]
        # clamped to the end, and nested slices stay relative to their parent
        tail = records.slice(2 * size, 10**9)
        assert tail.size_in_bytes == size
        assert [b.base_offset for b in tail.slice(0, size).batches()] == [6]
        assert list(MemoryRecords(data).slice(size, size + size // 2).records()) == list(sliced.records())


def test_file_objects_and_descriptors_are_not_closed(tmp_path: Path) -> None:
    path = tmp_path / "seg.log"
    path.write_bytes(batch(0, 2))
    with open(path, "rb") as f:
        with FileRecords(f) as records:
            assert len(list(records.records())) == 2
        assert not f.closed
        fd = os.open(path, os.O_RDONLY)
        try:
            FileRecords(fd, start=0, end=10).close()  # too short for an entry: no batches
            assert list(FileRecords(fd, start=0, end=10).batches()) == []
            os.fstat(fd)  # still open
        finally:
            os.close(fd)
    with pytest.raises(io.UnsupportedOperation):
        FileRecords(io.BytesIO(b""))


def test_file_truncated_after_headers_were_read(tmp_path: Path) -> None:
    path = tmp_path / "seg.log"
    path.write_bytes(batch(0, 3, value_size=1000))
    with FileRecords.open(path) as records:
        [b] = list(records.batches())
        os.truncate(path, 100)
        with pytest.raises(TruncatedDataError):
            list(b)


@settings(max_examples=30)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=5),
    magics=st.lists(st.sampled_from([0, 1, 2]), min_size=5, max_size=5),
    cut=st.integers(min_value=0, max_value=400),
)
def test_file_and_memory_records_agree(tmp_path_factory, sizes, magics, cut) -> None:
    data = b""
    offset = 0
    for n, magic in zip(sizes, magics, strict=False):
        b = RecordsBuilder(magic, base_offset=offset)
        for i in range(n):
            b.append(offset + i, 1000 + i, b"k", b"v" * i)
        data += b.build()
        offset += n
    data = data[: max(len(data) - cut, 0)]
    path = tmp_path_factory.mktemp("seg") / "seg.log"
    path.write_bytes(data)
    memory = MemoryRecords(data)
    with FileRecords.open(path) as records:
        assert [(b.position, b.size_in_bytes, b.magic) for b in records.batches()] == [
            (b.position, b.size_in_bytes, b.magic) for b in memory.batches()
        ]
        assert list(records.records()) == list(memory.records())


def test_batches_are_lazy_a_later_corrupt_entry_does_not_hide_earlier_ones() -> None:
    good = batch(0, 2)
    bad = bytearray(batch(2, 2))
    bad[16] = 9
    batches = MemoryRecords(good + bytes(bad)).batches()
    first = next(batches)
    assert [r.offset for r in first] == [0, 1]
    with pytest.raises(UnknownMagicError):
        next(batches)


def test_reading_after_close_raises_instead_of_reading_a_reused_descriptor(tmp_path: Path) -> None:
    # Once an owned file is closed its descriptor number is free: the next open() gets it, so
    # the records (and their slices, which share it) would silently read another file.
    mine, other = tmp_path / "mine.log", tmp_path / "other.log"
    mine.write_bytes(batch(0, 2))
    other.write_bytes(batch(0, 2, value_size=3))
    records = FileRecords.open(mine)
    sliced = records.slice(0, 10**6)
    [loaded] = list(records.batches())
    records.close()
    with open(other, "rb") as f:
        assert f.fileno() == records.fileno  # the descriptor was reused
        for use in (
            lambda: list(records.batches()),
            lambda: list(sliced.batches()),
            lambda: list(loaded),
            sliced.to_send,
            lambda: records.slice(0, 10),
        ):
            with pytest.raises(ConfigurationError, match="closed"):
                use()


def test_reading_after_the_callers_file_object_is_closed_raises(tmp_path: Path) -> None:
    path = tmp_path / "mine.log"
    path.write_bytes(batch(0, 2))
    with open(path, "rb") as f:
        records = FileRecords(f)
        sliced = records.slice(0, 10**6)
    with open(path, "rb"), pytest.raises(ConfigurationError, match="closed"):
        list(sliced.batches())


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    ((None,), {}, "needs a path"),  # AttributeError: 'NoneType' object has no attribute 'fileno'
    ((b"",), {}, "needs a path"),
    (("PATH", "0"), {}, "start"),  # TypeError on comparing
    (("PATH", 0, "9"), {}, "start"),
    (("PATH", -1), {}, "start"),
    (("PATH", 5, 4), {}, "start"),
    (("PATH", 1 << 20), {}, "start"),  # past the end of the file, no end given
    (("PATH",), {"max_decompressed_size": None}, "max_decompressed_size"),
    (("PATH",), {"max_decompressed_size": 0}, "max_decompressed_size"),
])
def test_bad_arguments_are_configuration_errors_and_leave_no_file_open(
        tmp_path: Path, args: tuple[object, ...], kwargs: dict[str, object], match: str) -> None:
    path = tmp_path / "mine.log"
    path.write_bytes(batch(0, 2))
    args = tuple(path if a == "PATH" else a for a in args)
    with pytest.raises(ConfigurationError, match=match) as refused:
        FileRecords(*args, **kwargs)  # type: ignore[arg-type]
    # the error's traceback keeps the half-built object: its file must be closed already
    frames = [tb.tb_frame for tb in _tracebacks(refused.tb)]
    opened = [f.f_locals["self"]._file for f in frames if isinstance(f.f_locals.get("self"), FileRecords)]
    assert all(f is None or f.closed for f in opened)
    with FileRecords.open(path) as records:
        for position, size in (("0", 1), (0, None), (-1, 1)):
            with pytest.raises(ConfigurationError, match="slice"):
                records.slice(position, size)  # type: ignore[arg-type]


def _tracebacks(tb: object) -> list[types.TracebackType]:
    out = []
    while isinstance(tb, types.TracebackType):
        out.append(tb)
        tb = tb.tb_next
    return out


def test_a_read_never_returns_bytes_past_the_records_end(tmp_path: Path) -> None:
    """read(position, size) is of the region [start, end): bytes the file has past a slice's
    end (or past the end the file had when opened) are not the records' and are refused as
    the records' end, a TruncatedDataError at that file position (they were returned)."""
    path = tmp_path / "seg.log"
    path.write_bytes(bytes(range(100)))
    with FileRecords.open(path) as records:
        sliced = records.slice(10, 5)
        assert sliced.read(0, 5) == bytes(range(10, 15))
        assert sliced.read(5, 0) == b""
        for position, size in ((0, 6), (4, 2), (5, 1)):
            with pytest.raises(TruncatedDataError, match=f"the records end after {5 - position} of the {size} "
                                                         f"bytes asked for at position {position}"):
                sliced.read(position, size)
        for position, size in ((6, 0), (1000, 1)):
            with pytest.raises(TruncatedDataError, match=f"position {position} is past the records' end "
                                                         r"\(5 bytes\) \(at byte 15\)"):
                sliced.read(position, size)
        nested = sliced.slice(2, 10)  # clamped to its parent's end
        assert nested.read(0, 3) == bytes(range(12, 15))
        with pytest.raises(TruncatedDataError, match=r"\(at byte 15\)"):
            nested.read(0, 4)
        with open(path, "ab") as f:  # the file grows: the records opened before end where it ended
            f.write(b"more")
        with pytest.raises(TruncatedDataError, match=r"after 1 of the 2 bytes .* \(at byte 100\)"):
            records.read(99, 2)
        assert records.read(99, 1) == b"\x63"
        os.truncate(path, 12)  # cut since opened: the file's end, still before any buffer
        with pytest.raises(TruncatedDataError, match=r"file ends after 2 of the 5 bytes .* \(at byte 12\)"):
            sliced.read(0, 5)
