"""The records the kernel's decoders make: a private subclass of the public ``Record``
NamedTuple with its own deallocation and free list (``kernel.make_record_type``). A user must not
be able to tell them from ``Record`` s except by ``type(record) is Record``: fields, equality,
hashing, ordering, unpacking, slicing, ``_replace``/``_asdict``, repr, pickling and copying."""

from __future__ import annotations

import copy
import gc
import pickle
from typing import Any

import pytest

from lazyconv.records import MemoryRecords, Record, RecordsBuilder, _impl

pytestmark = pytest.mark.skipif(_impl.NATIVE is None, reason="compiled kernel not in use")


def _records() -> list[Record]:
    builder = RecordsBuilder(2, 0, base_offset=40)
    builder.append(None, 1_700_000_000_000, b"key", b"value", [("h", b"v"), ("n", None)])
    builder.append(None, 1_700_000_000_001, None, None, [])
    return list(MemoryRecords(bytes(builder.build())).records())


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


def test_the_kernel_record_type_is_made_once_and_only_for_plain_named_tuples() -> None:
    kernel: Any = _impl.kernel_module()
    assert kernel.make_record_type(Record) is _impl.NATIVE.record_type
    with pytest.raises(ValueError):
        kernel.make_record_type(tuple)


@pytest.mark.slow  # over a second here: the full suite runs it, the quick set does not
def test_deeply_nested_records_made_by_python_code_are_freed_without_overflow() -> None:
    record = _records()[0]
    for nest in (lambda r: r._replace(offset=r), lambda r: r._replace(headers=r), lambda r: r._replace(headers=(r,))):
        nested = record
        for _ in range(100_000):
            nested = nest(nested)
        del nested
    gc.collect()


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
