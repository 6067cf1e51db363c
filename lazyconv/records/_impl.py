"""The one switch between the twins: which implementation of each hot function runs.

lazyconv's hot path has two implementations that give the same bytes and the same errors: the
compiled kernel (``lazyconv.records._ckernel``, C sources in ``records/_kernel/``) and the
pure-Python reference (``_codec.py`` and the ``*_reference`` functions of the records layer).
This module is the only one that knows about the kernel. It loads it once (unless
``LAZYCONV_NO_EXTENSIONS=1``, or it was not built: then a :class:`RuntimeWarning` says so once)
and binds each hot function below to the kernel's version or to the reference's:

=============================  ==============================================================
name                           the reference twin
=============================  ==============================================================
``crc32``, ``crc32c``          zlib's and the ``crc32c`` package's
``append_legacy_message``      ``_codec.append_legacy_message_reference``
``record_type``                :class:`~lazyconv.records._types.Record` (the kernel: a faster subclass)
``iter_v2_records``            hands the whole payload to its ``fallback`` (the reference parser)
``iter_plain_v2``              hands each batch to its ``fallback``
``scan_plain_v2``              ``-1``: "iterate the batches"
``convert_v2_run``             ``(0, 0, 0, STOP_INVALID)``: "convert the first entry yourself"
``convert_v2_chunk``           ``(0, CHUNK_MIXED, 0, 0)``: "group and convert this chunk yourself"
``send_plain_chunk``           ``(SEND_DECLINED, ...)``: "read, convert and write this chunk yourself"
``convert_v2_records``,        ``None``: "convert these yourself"
``convert_v2_compressed``
``encode_v2_records``          ``False``: "encode these yourself"
``legacy_set_to_v2``           ``None``: "up-convert this set yourself"
``lz4_frame_blocks``           ``None``: "walk the frame yourself"
``snappy_compress_raw``        ``_snappy.compress_raw_reference`` (snappy 1.1.10's bytes, as the kernel's)
``uninitialized_bytearray``    ``bytearray(size)``, zeroed (the kernel's is not: a received frame
                               is written whole before any byte is read, so zeroing it is waste)
``scan_entries``,              ``None``: the calling module's own reference does the whole job
``segment_run``,               (``scan_batches_reference``, ``segment_run_reference``,
``convert_v2_run_ends``,       ``convert_run_ends_reference``, ``digest_*_reference``), as it is
``digest_v2_records``,         written in terms of the records layer
``digest_legacy_run``,
``digest_delivered``
=============================  ==============================================================

So every kernel entry point may decline, and the reference code the caller runs then is the
one that runs with the kernel absent: callers never ask whether the kernel is there. One
capability is asked: ``current.converts_runs`` (``True`` for the kernel) tells the callers that
read a whole run of batches only to hand it to ``convert_v2_run``/``convert_v2_chunk`` whether
that read pays, so that pure Python does not read data twice.

Callers look the functions up here at call time (``_impl.crc32c(...)``, never ``from
lazyconv.records._impl import crc32c``: ``tests/records/test_impl_switch.py`` checks), so that
:func:`using` switches every one of them at once: differential tests and the fuzzers run the
same public code on both twins with ``with _impl.using(_impl.REFERENCE): ...`` (tests only: it
rebinds module globals, for every thread).

- :data:`IMPLEMENTATION`: ``"native"`` or ``"python"`` (what was chosen at import).
- :data:`CPU_FEATURES`: the CPU features the kernel uses (``"pclmul"``, ``"sse4.2"``), empty
  in pure Python.
- :data:`NATIVE` (``None`` without the kernel) and :data:`REFERENCE`: the two twins, as
  namespaces of the functions above.
- :func:`describe`: one line for ``lazyconv --version``.
"""

from __future__ import annotations

import importlib
import logging
import operator
import os
import sys
import warnings
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType, SimpleNamespace
from typing import Any, Literal

from crc32c import crc32c as _package_crc32c

from lazyconv.records import _codec, _snappy
from lazyconv.records._format import LOG_HEADER, LOG_OVERHEAD
from lazyconv.records._types import Record

__all__ = [
    "IMPLEMENTATION",
    "CPU_FEATURES",
    "NATIVE",
    "REFERENCE",
    "NO_EXTENSIONS_ENV",
    "using",
    "describe",
    "implementation_info",
    "STOP_END",
    "STOP_COMPRESSED",
    "STOP_NOT_V2",
    "STOP_PARTIAL",
    "STOP_INVALID",
    "CHUNK_DONE",
    "CHUNK_MIXED",
    "SEND_CONVERTED",
    "SEND_DECLINED",
    "SEND_SHORT",
]

log = logging.getLogger(__name__)

NO_EXTENSIONS_ENV = "LAZYCONV_NO_EXTENSIONS"

# Why convert_v2_run stopped (the kernel's enum lc_stop; a test checks they are the kernel's).
STOP_END = 0  # every entry of the data was converted
STOP_COMPRESSED = 1
STOP_NOT_V2 = 2
STOP_PARTIAL = 3
STOP_INVALID = 4  # the entry at `consumed` is left to the reference code (it reports errors)
# What convert_v2_chunk decided (the kernel's enum lc_chunk_stop).
CHUNK_DONE = 0
CHUNK_MIXED = 1
# What send_plain_chunk did (the kernel's enum lc_send_stop).
SEND_CONVERTED = 0  # the chunk was converted and written as far as the socket took it
SEND_DECLINED = 1  # not a plain chunk (or an invalid one): nothing was written
SEND_SHORT = 2  # the file ended inside the window: nothing was written


def _load() -> ModuleType | None:
    if os.environ.get(NO_EXTENSIONS_ENV) == "1":
        return None
    try:
        module = importlib.import_module("lazyconv.records._ckernel")
    except ImportError as exc:
        warnings.warn(
            f"lazyconv's compiled kernel is not available ({exc}); running in pure Python "
            f"(set {NO_EXTENSIONS_ENV}=1 to silence this)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    missing = [name for name in _ENTRY_POINTS if not hasattr(module, name)]
    if missing:  # a kernel built from older sources (an editable install not rebuilt)
        warnings.warn(
            f"lazyconv's compiled kernel is out of date (it lacks {', '.join(missing)}): rebuild "
            f"it (pip install -e . again, or bash .ci/setup.sh); running in pure Python",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return module


# what _native takes from the kernel: a module without one of them is not used at all
_ENTRY_POINTS = (
    "cpu_features", "make_record_type", "append_legacy_message", "crc32", "crc32c",
    "iter_v2_records", "iter_plain_v2", "scan_plain_v2", "convert_v2_run", "convert_v2_chunk",
    "send_plain_chunk", "convert_v2_records", "convert_v2_compressed", "encode_v2_records",
    "legacy_set_to_v2", "lz4_frame_blocks", "scan_entries", "segment_run", "convert_v2_run_ends",
    "digest_v2_records", "digest_legacy_run", "digest_delivered", "uninitialized_bytearray",
    "snappy_compress_raw",
)
_kernel: ModuleType | None = _load()  # the extension module: named nowhere else
IMPLEMENTATION: Literal["native", "python"] = "native" if _kernel is not None else "python"
CPU_FEATURES: tuple[str, ...] = tuple(_kernel.cpu_features()) if _kernel is not None else ()


# --------------------------------------------------------------------------------------------
# The reference twin


def _reference_iter_v2_records(
    record_type: type, data: Any, count: int, base_offset: int, base_timestamp: int,
    timestamp_override: int | None, fallback: Callable[[int, int], Iterator[Record]],
) -> Iterator[Record]:
    """Every record comes from ``fallback``: the reference parser from the first record."""
    return iter(fallback(0, 0))


def _reference_iter_plain_v2(
    record_type: type, data: Any, end: int, fallback: Callable[[int, int, int], Iterator[Record]],
) -> Iterator[Record]:
    """Every batch of ``data[:end]`` comes whole from ``fallback`` (the batch's own iteration)."""
    view = memoryview(data).cast("B")
    position = 0
    while end - position >= LOG_OVERHEAD:
        yield from fallback(position, -1, 0)
        position += LOG_OVERHEAD + LOG_HEADER.unpack_from(view, position)[1]  # offset, length


def _reference_uninitialized_bytearray(size: int) -> bytearray:
    """``size`` zero bytes: the kernel's twin leaves them unspecified. The same errors: an int
    only (TypeError), at least 0 (ValueError)."""
    size = operator.index(size)
    if size < -sys.maxsize - 1:  # as the kernel's conversion to Py_ssize_t
        raise OverflowError("cannot fit 'int' into an index-sized integer")
    if size < 0:
        raise ValueError(f"a buffer size must be >= 0, got {size}")
    return bytearray(size)


def _decline(answer: Any) -> Callable[..., Any]:
    def declined(*args: Any) -> Any:
        return answer

    declined.__doc__ = f"The reference twin declines: returns {answer!r} (the caller's own code runs)."
    return declined


REFERENCE = SimpleNamespace(
    name="python",
    converts_runs=False,
    crc32=zlib.crc32,
    crc32c=_package_crc32c,
    append_legacy_message=_codec.append_legacy_message_reference,
    record_type=Record,
    iter_v2_records=_reference_iter_v2_records,
    iter_plain_v2=_reference_iter_plain_v2,
    scan_plain_v2=_decline(-1),
    convert_v2_run=_decline((0, 0, 0, STOP_INVALID)),
    convert_v2_chunk=_decline((0, CHUNK_MIXED, 0, 0)),
    send_plain_chunk=_decline((SEND_DECLINED, 0, 0, 0, 0, 0, None, 0, 0)),
    convert_v2_records=_decline(None),
    convert_v2_compressed=_decline(None),
    encode_v2_records=_decline(False),
    legacy_set_to_v2=_decline(None),
    lz4_frame_blocks=_decline(None),
    snappy_compress_raw=_snappy.compress_raw_reference,
    uninitialized_bytearray=_reference_uninitialized_bytearray,
    scan_entries=None,
    segment_run=None,
    convert_v2_run_ends=None,
    digest_v2_records=None,
    digest_legacy_run=None,
    digest_delivered=None,
)


# --------------------------------------------------------------------------------------------
# The native twin


def _native(kernel: ModuleType) -> SimpleNamespace:
    # The decoders' records: the kernel's subclass of Record (a Record and a tuple in every
    # respect, named and pickled as Record) with a cheaper allocation and deallocation than
    # CPython's generic path for tuple subclasses (docs/kernel.md, Decoding).
    record_type = kernel.make_record_type(Record)
    write_legacy_message = kernel.append_legacy_message
    reference_append = _codec.append_legacy_message_reference

    def append_legacy_message(
        out: bytearray, offset: int, timestamp: int, key: bytes | None, value: bytes | None, magic: int,
        attributes: int,
    ) -> int:
        """:func:`~lazyconv.records._codec.append_legacy_message_reference` by the kernel (one call,
        one CRC); values it cannot write go to the reference, which raises as it always has."""
        try:
            return write_legacy_message(out, offset, timestamp, key, value, magic, attributes)
        except (OverflowError, ValueError, TypeError):
            return reference_append(out, offset, timestamp, key, value, magic, attributes)

    compress_snappy = kernel.snappy_compress_raw
    reference_snappy = _snappy.compress_raw_reference

    def snappy_compress_raw(data: Any) -> bytes:
        """:func:`~lazyconv.records._snappy.compress_raw_reference` by the kernel; what the
        kernel refuses as past snappy's uint32 length (an OverflowError, before it allocates or
        reads) goes to the reference, which raises its CompressionError before reading too."""
        try:
            return compress_snappy(data)
        except OverflowError:
            return reference_snappy(data)

    return SimpleNamespace(
        name="native",
        converts_runs=True,
        crc32=kernel.crc32,
        crc32c=kernel.crc32c,
        append_legacy_message=append_legacy_message,
        record_type=record_type,
        iter_v2_records=kernel.iter_v2_records,
        iter_plain_v2=kernel.iter_plain_v2,
        scan_plain_v2=kernel.scan_plain_v2,
        convert_v2_run=kernel.convert_v2_run,
        convert_v2_chunk=kernel.convert_v2_chunk,
        send_plain_chunk=kernel.send_plain_chunk,
        convert_v2_records=kernel.convert_v2_records,
        convert_v2_compressed=kernel.convert_v2_compressed,
        encode_v2_records=kernel.encode_v2_records,
        legacy_set_to_v2=kernel.legacy_set_to_v2,
        lz4_frame_blocks=kernel.lz4_frame_blocks,
        snappy_compress_raw=snappy_compress_raw,
        uninitialized_bytearray=kernel.uninitialized_bytearray,
        scan_entries=kernel.scan_entries,
        segment_run=kernel.segment_run,
        convert_v2_run_ends=kernel.convert_v2_run_ends,
        digest_v2_records=kernel.digest_v2_records,
        digest_legacy_run=kernel.digest_legacy_run,
        digest_delivered=kernel.digest_delivered,
    )


NATIVE: SimpleNamespace | None = _native(_kernel) if _kernel is not None else None
_NAMES = tuple(name for name in vars(REFERENCE) if name not in ("name", "converts_runs"))

# --------------------------------------------------------------------------------------------
# The functions in use (rebound by `using`); typed loosely: each twin documents its own.

crc32: Callable[..., int]
crc32c: Callable[..., int]
append_legacy_message: Callable[..., int]
record_type: type[Record]
iter_v2_records: Callable[..., Iterator[Record]]
iter_plain_v2: Callable[..., Iterator[Record]]
scan_plain_v2: Callable[..., int]
convert_v2_run: Callable[..., tuple[int, int, int, int]]
convert_v2_chunk: Callable[..., tuple[int, int, int, int]]
send_plain_chunk: Callable[..., tuple[int, int, int, int, int, int, bytes | None, int, int]]
convert_v2_records: Callable[..., Any]
convert_v2_compressed: Callable[..., Any]
encode_v2_records: Callable[..., bool]
legacy_set_to_v2: Callable[..., tuple[int, int, int, int, int] | None]
lz4_frame_blocks: Callable[..., Any]
snappy_compress_raw: Callable[[Any], bytes]
uninitialized_bytearray: Callable[[int], bytearray]
scan_entries: Callable[..., Any] | None
segment_run: Callable[..., Any] | None
convert_v2_run_ends: Callable[..., Any] | None
digest_v2_records: Callable[..., Any] | None
digest_legacy_run: Callable[..., Any] | None
digest_delivered: Callable[..., Any] | None
current: SimpleNamespace = REFERENCE  # the twin in use (bound below)


def _bind(twin: SimpleNamespace) -> None:
    namespace = globals()
    for name in _NAMES:
        namespace[name] = getattr(twin, name)
    namespace["current"] = twin


_bind(NATIVE if NATIVE is not None else REFERENCE)


@contextmanager
def using(twin: SimpleNamespace | str) -> Iterator[SimpleNamespace]:
    """Run the body with ``twin`` (:data:`NATIVE`, :data:`REFERENCE`, or their names
    ``"native"``/``"python"``) bound to every hot function; the previous one afterwards.
    For differential tests and fuzzers: it rebinds this module's globals, for every thread."""
    if isinstance(twin, str):
        twin = {"python": REFERENCE, "native": NATIVE}.get(twin)  # type: ignore[assignment]
        if twin is None:
            raise ValueError("no such implementation in this process (the kernel is not loaded)")
    previous = current
    _bind(twin)  # type: ignore[arg-type]
    try:
        yield twin  # type: ignore[misc]
    finally:
        _bind(previous)


def implementation_info() -> dict[str, object]:
    """The implementation in use: ``{"implementation", "cpu_features", "crc32", "crc32c"}``
    (the CRC entries name the routines in use: ``pclmul``/``sse4.2``/``slice-by-8`` natively,
    ``zlib``/``crc32c-package`` in pure Python)."""
    if _kernel is None:
        return {"implementation": "python", "cpu_features": [], "crc32": "zlib", "crc32c": "crc32c-package"}
    crc32_name, crc32c_name = _kernel.crc_implementations()
    return {
        "implementation": "native",
        "cpu_features": list(CPU_FEATURES),
        "crc32": crc32_name,
        "crc32c": crc32c_name,
    }


def describe() -> str:
    """One line: the implementation and CPU features in use (``lazyconv --version``)."""
    info = implementation_info()
    if _kernel is None:
        return "implementation: python (pure-Python reference)"
    features = " ".join(CPU_FEATURES) or "none"
    return f"implementation: native (cpu features: {features}; crc32: {info['crc32']}, crc32c: {info['crc32c']})"


def kernel_module() -> ModuleType | None:
    """The extension module itself, for the kernel's own tests and tools (``None`` without it)."""
    return _kernel
