"""The records the kernel's decoders make: a private subclass of the public ``Record``
NamedTuple with its own deallocation and free list (``kernel.make_record_type``). A user must not
be able to tell them from ``Record`` s except by ``type(record) is Record``: fields, equality,
hashing, ordering, unpacking, slicing, ``_replace``/``_asdict``, repr, pickling and copying."""

from __future__ import annotations

import copy
import gc
import pickle
from typing import Any, NamedTuple

import pytest

from lazyconv.records import MemoryRecords, Record, RecordsBuilder, _impl

pytestmark = pytest.mark.skipif(_impl.NATIVE is None, reason="compiled kernel not in use")


def _records_bytes() -> bytes:
    builder = RecordsBuilder(2, 0, base_offset=40)
    builder.append(None, 1_700_000_000_000, b"key", b"value", [("h", b"v"), ("n", None)])
    builder.append(None, 1_700_000_000_001, None, None, [])
    return bytes(builder.build())


def _records() -> list[Record]:
    return list(MemoryRecords(_records_bytes()).records())


def test_decoded_records_behave_as_records() -> None:
    first, second = _records()
    plain = Record(40, 1_700_000_000_000, b"key", b"value", (("h", b"v"), ("n", None)))
    assert type(first) is _impl.NATIVE.record_type and type(first).__name__ == "Record"
    assert isinstance(first, Record) and isinstance(first, tuple)
    assert first == plain and hash(first) == hash(plain) and first == tuple(plain) and first < second
    assert repr(first) == repr(plain)
    offset, timestamp, key, value, headers = first
    assert (offset, timestamp, key, value, headers) == tuple(plain) and first[2:4] == (b"key", b"value")
    assert first.offset == 40 and second.key is None and second.headers == ()
    assert first._asdict() == plain._asdict() and first._fields == Record._fields
    assert first._replace(offset=1) == plain._replace(offset=1)
    for restored in (pickle.loads(pickle.dumps(first)), copy.copy(first), copy.deepcopy(first)):
        assert restored == plain and type(restored) is Record


def test_the_kernel_record_type_is_made_once_per_type_and_only_for_plain_named_tuples() -> None:
    kernel: Any = _impl.kernel_module()
    assert kernel.make_record_type(Record) is _impl.NATIVE.record_type
    with pytest.raises(TypeError):
        kernel.make_record_type(int)

    class WithDict(tuple):  # noqa: SLOT001 - a __dict__ is what is refused
        pass

    with pytest.raises(TypeError):
        kernel.make_record_type(WithDict)


class Other(NamedTuple):
    """A NamedTuple like Record (as a reloaded lazyconv.records._types would define it again)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_a_second_record_type_gets_its_own_kernel_type() -> None:
    """The record type was process-global: a second base (lazyconv.records._types reloaded, so a
    new Record class, or another NamedTuple) made make_record_type raise ValueError, and with it
    the import of lazyconv.records._impl. Each base now gets its own type (the first keeps the
    free list); records of either decode, compare, pickle and free as their base's."""
    kernel: Any = _impl.kernel_module()
    other = kernel.make_record_type(Other)
    assert other is kernel.make_record_type(Other) and other is not _impl.NATIVE.record_type
    assert other.__base__ is Other and _impl.NATIVE.record_type.__base__ is Record
    data = _records_bytes()
    first = list(MemoryRecords(data).records())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_impl, "record_type", other)
        second = list(MemoryRecords(data).records())
    assert [type(r) for r in second] == [other, other] and [type(r) for r in first] == [_impl.NATIVE.record_type] * 2
    assert [tuple(r) for r in second] == [tuple(r) for r in first]
    assert pickle.loads(pickle.dumps(second[0])) == Other(*first[0]) and type(pickle.loads(pickle.dumps(second[0]))) is Other
    del first, second
    gc.collect()


@pytest.mark.slow  # over a second here: the full suite runs it, the quick set does not
def test_deeply_nested_records_made_by_python_code_are_freed_without_overflow() -> None:
    record = _records()[0]
    for nest in (lambda r: r._replace(offset=r), lambda r: r._replace(headers=r), lambda r: r._replace(headers=(r,))):
        nested = record
        for _ in range(100_000):
            nested = nest(nested)
        del nested
    gc.collect()


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_decoded_records_are_freed_and_reused() -> None:
    builder = RecordsBuilder(2, 0)
    for index in range(200):
        builder.append(None, index, b"k%d" % index, b"v" * index, [])
    raw = bytes(builder.build())
    for _ in range(3):
        assert [record.value for record in MemoryRecords(raw).records()] == [b"v" * i for i in range(200)]
    kept = list(MemoryRecords(raw).records())
    gc.collect()
    assert [record.key for record in kept] == [b"k%d" % i for i in range(200)]
