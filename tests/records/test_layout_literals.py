"""Wire layout facts are written once, in ``lazyconv/records/_format.py``; everything else uses
their names (issue 24: ``_PRODUCER_ID_AT = 43`` in serve, bytes 8-11 and 57-60 read by hand in C).

What is checked, in the modules that read or write record bytes (:data:`PYTHON_MODULES`: the
records layer, the log-directory layer, conversion, the lazy send, up-conversion, serve's
append validation and producer state, the Spark job's planning, segment scan and derived
conversion, ``lazyconv dump`` and the fixture generator), by an AST scan of their code
(docstrings and comments are free to say "61 bytes"):

- the offset argument of ``unpack_from`` / ``pack_into`` holds no integer literal but 0
  (``pack_into(out, 17, ...)``, ``unpack_from(data, pos + 18)``);
- no subscript (index or slice bound) holds an integer between 8 and 61, the span of the
  headers (``header[16]``, ``out[21:]``);
- no such integer is added to or subtracted from anything (``position + 8``, ``12 + size``);
- no attribute bit (0x07, 0x08, 0x10, 0x20, 0x40, 0x27) is and-ed or or-ed with something
  named ``attr...`` or with a subscript (``batch.attributes & 0x07``, ``entry[22] & 7``);
- no constant named like a layout fact (``..._AT``, ``...OFFSET``, ``...POSITION``,
  ``...OVERHEAD``, ``...HEADER...``, ``...SIZE``, ``ATTR...``, ``...FLAG...``, ``...MASK``,
  ``...TRANSACTIONAL``, ``...CONTROL``) is assigned such an integer or bit;
- no string literal repeats the format of one of ``_format``'s header structs of three fields or
  more (``">qiIbb"``, ``">qhi"``, ...), and no struct named like a layout fact repeats any of
  them (``_HEADER = struct.Struct(">qi")``): use the named struct;
- no length or size is compared with such an integer (``len(head) < 17``, ``size < 14``), and
  no ``read`` asks for such a count of bytes (``log.read(position, 27)``);
- no lower-case name for a size, length, offset or position is assigned such an integer, even
  one of two (``entry_size = 8 if kind == "index" else 12``: the index entry sizes are
  :mod:`lazyconv.logdir._index`'s; file names such as ``".log"`` are held to
  :mod:`lazyconv.logdir._naming` by ``tests/logdir/test_logdir_layer.py``).

And in the kernel's C sources (``_kernel/*.c``, ``*.h``; ``format.h`` is generated from
``_format.py``; ``crc.c`` and ``lz4frame.c`` hold no record layout): no subscript with an integer
between 8 and 61 (``b[57]``), and no ``get_i32``/``get_i64``/``put_i32``/``put_i64`` whose pointer
is offset by such an integer (``get_i32(p + 8)``).

A value that really is not a layout fact (a codec framing, an error code) has a name defined in
its own module, as lz4's and gzip's framings in ``compression.py`` and snappy's encoding in
``_snappy.py`` (not scanned) do. The
fixture generator's writer (``fixtures/_wire.py``, not scanned) states the layout on its own on
purpose: the fixtures are the ground truth the codecs are checked against.
"""

from __future__ import annotations

import ast
import re
import struct
from pathlib import Path

import pytest

from lazyconv.records import _format
from tests.fresh_ast import parse

PACKAGE = Path(_format.__file__).resolve().parent.parent
KERNEL = PACKAGE / "records" / "_kernel"

PYTHON_MODULES = sorted(
    {
        path.relative_to(PACKAGE).as_posix()
        for folder in ("records", "logdir", "fixtures", "conversion")
        for path in (PACKAGE / folder).glob("*.py")
    }
    # the facts themselves; codec framings; the fixtures' independent writer (see above)
    - {"records/_format.py", "records/_compression.py", "records/_snappy.py", "fixtures/_wire.py"}
    | {
        "partitioner/_sizes.py",
        "serve/_append_validation.py",
        "serve/_producer_state.py",
        "spark/_planning.py",
        "spark/_segment_scan.py",
        "spark/_scan_state.py",
        "spark/_scan_entries.py",
        "spark/_scan_runs.py",
        "spark/_scan_conversions.py",
        "spark/_scan_indexes.py",
        "spark/_derived_conversion.py",
        "_commands/dump.py",
        "_commands/_dump_lines.py",
    }
)
C_SOURCES = sorted(
    path.name for path in KERNEL.iterdir()
    if path.suffix in (".c", ".h") and path.name not in ("format.h", "crc.c", "lz4frame.c")
)

HEADER_SPAN = range(8, 62)  # the bytes of the v2 batch header (and of every legacy header)
ATTRIBUTE_BITS = {
    _format.COMPRESSION_CODEC_MASK,
    _format.TIMESTAMP_TYPE_MASK,
    _format.TRANSACTIONAL_FLAG_MASK,
    _format.CONTROL_FLAG_MASK,
    _format.DELETE_HORIZON_FLAG_MASK,
    _format.COMPRESSION_CODEC_MASK | _format.CONTROL_FLAG_MASK,
}
LAYOUT_NAME = re.compile(r"(_AT$|OFFSET$|POSITION$|OVERHEAD$|HEADER|SIZE$|^_?ATTR|FLAG|MASK$|TRANSACTIONAL$|CONTROL$)")
ALL_STRUCT_FORMATS = {value.format for value in vars(_format).values() if isinstance(value, struct.Struct)}
STRUCT_FORMATS = {  # the header structs of three fields or more (">qi" and ">qq" are too common)
    value.format
    for value in vars(_format).values()
    if isinstance(value, struct.Struct) and len(value.unpack(bytes(value.size))) >= 3
}
SIZE_NAME = re.compile(r"(size|length|len|offset|position|_at)$")  # lower-case names of layout facts


def _ints(node: ast.AST) -> list[ast.Constant]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Constant) and type(n.value) is int]


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _in_span(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value in HEADER_SPAN


def _names_a_size(node: ast.AST, source: str) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len":
        return True
    text = (ast.get_source_segment(source, node) or "").lower()
    return isinstance(node, (ast.Name, ast.Attribute)) and ("size" in text or "length" in text)


def layout_literals(source: str) -> list[str]:
    """Every layout literal of one Python module's code, as ``line: code`` strings."""
    tree = parse(source)
    docstrings = _docstrings(tree)
    found: list[tuple[int, str]] = []

    def report(node: ast.AST, what: str) -> None:
        found.append((node.lineno, f"{what}: {ast.get_source_segment(source, node)}"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
            "unpack_from", "pack_into"
        ):
            on_module = isinstance(node.func.value, ast.Name) and node.func.value.id == "struct"
            at = 2 if on_module else 1
            offsets = node.args[at : at + 1] + [k.value for k in node.keywords if k.arg == "offset"]
            if any(c.value not in (0, 1) for offset in offsets for c in _ints(offset)):
                report(node, "struct offset")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "read":
            if any(_in_span(arg) for arg in node.args):
                report(node, "read size")
        elif isinstance(node, ast.Subscript):
            if any(c.value in HEADER_SPAN for c in _ints(node.slice)):
                report(node, "subscript")
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_in_span(a) for a in operands) and any(_names_a_size(a, source) for a in operands):
                report(node, "size comparison")
        elif isinstance(node, ast.BinOp):
            sides = ((node.left, node.right), (node.right, node.left))
            if isinstance(node.op, (ast.Add, ast.Sub)):
                if any(isinstance(side, ast.Constant) and side.value in HEADER_SPAN for side, _ in sides):
                    report(node, "offset arithmetic")
            elif isinstance(node.op, (ast.BitAnd, ast.BitOr)):
                for side, other in sides:
                    text = (ast.get_source_segment(source, other) or "").lower()
                    if isinstance(side, ast.Constant) and side.value in ATTRIBUTE_BITS and (
                        "attr" in text or isinstance(other, ast.Subscript)
                    ):
                        report(node, "attribute bit")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            layout_named = any(name.isupper() and LAYOUT_NAME.search(name) for name in names)
            if isinstance(node.value, ast.Constant):
                value = node.value.value
                if type(value) is int and (value in HEADER_SPAN or value in ATTRIBUTE_BITS) and layout_named:
                    report(node, "layout constant")
            if isinstance(node.value, ast.Call) and layout_named and any(
                isinstance(arg, ast.Constant) and arg.value in ALL_STRUCT_FORMATS for arg in node.value.args
            ):
                report(node, "struct format")
            values = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) else [node.value]
            if any(_in_span(v) for v in values) and any(
                not name.isupper() and SIZE_NAME.search(name.lower()) for name in names
            ):
                report(node, "layout constant")
        elif isinstance(node, ast.Constant) and node.value in STRUCT_FORMATS and id(node) not in docstrings:
            report(node, "struct format")
    return [f"{line}: {text}" for line, text in sorted(set(found))]


C_SUBSCRIPT = re.compile(r"\w\s*\[\s*(\d+)\s*\]")
C_ACCESS = re.compile(r"\b(?:get|put)_i(?:32|64)\s*\(([^;]*?)\)")


def c_layout_literals(source: str) -> list[str]:
    """Every layout literal of one C file, as ``line: code`` strings (comments dropped)."""
    source = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"), source, flags=re.S)
    source = re.sub(r"//[^\n]*", "", source)
    found = []
    for number, line in enumerate(source.splitlines(), 1):
        hits = [int(m.group(1)) for m in C_SUBSCRIPT.finditer(line)]
        hits += [int(n) for m in C_ACCESS.finditer(line) for n in re.findall(r"[+-]\s*(\d+)\b", m.group(1))]
        if any(value in HEADER_SPAN for value in hits):
            found.append(f"{number}: {line.strip()}")
    return found


@pytest.mark.slow  # a parse of every module: a code-quality scan, kept out of the quick look
@pytest.mark.parametrize("module", PYTHON_MODULES)
def test_no_layout_literals_in_python(module: str) -> None:
    assert layout_literals((PACKAGE / module).read_text()) == []


@pytest.mark.parametrize("name", C_SOURCES)
def test_no_layout_literals_in_c(name: str) -> None:
    assert c_layout_literals((KERNEL / name).read_text()) == []


@pytest.mark.parametrize(
    "code",
    [
        "_U32.pack_into(out, 17, crc32c(out[21:]))",
        "x = struct.unpack_from('>q', header, 35)",
        "magic = header[16]",
        "error = position + 8",
        "codec = batch.attributes & 0x07",
        "flag = entry[22] & 7",
        "_PRODUCER_ID_AT = 43",
        "_TRANSACTIONAL = 0x10",
        "HEADER = struct.Struct('>qiIbb')",
        "_PRODUCER_FIELDS = struct.Struct('>qhi')",
        "_MIN_ENTRY_SIZE = 14",
        # found later (issue 24): the Spark job's planning and scan, dump, the fixture generator
        "head = log.read(position, 27)",
        "ok = len(head) < 17",
        "bad = size < 14 or magic > 2",
        "ok = position + 12 + size > log.size",
        "_HEADER = struct.Struct('>qi')",
        "_ENTRY_HEADER = struct.Struct('>qi')",
        "_PADDING_HEADER = 12",
        "entry_size = 8 if kind == 'index' else 12",
        "(pid,) = struct.unpack_from('>q', batch.data, 43)",
        "size = int.from_bytes(data[pos + 8 : pos + 12], 'big')",
    ],
)
def test_the_scan_catches_what_issue_24_found(code: str) -> None:
    assert layout_literals(code), code


def test_the_c_scan_catches_bytes_read_by_hand() -> None:
    assert c_layout_literals("int32_t n = (int32_t)(((uint32_t)b[57] << 24) | b[60]);")
    assert c_layout_literals("int32_t size = get_i32(data + pos + 8);")
    assert not c_layout_literals("int32_t size = get_i32(data + pos + LC_SIZE_OFFSET); /* b[57] */")


def test_offsets_are_derived_field_by_field() -> None:
    """Each v2 field starts where the previous one ends (as Kafka's DefaultRecordBatch derives
    them), and the header struct covers exactly those fields."""
    fields = [
        "BASE_OFFSET", "LENGTH", "PARTITION_LEADER_EPOCH", "MAGIC", "CRC", "ATTRIBUTES",
        "LAST_OFFSET_DELTA", "BASE_TIMESTAMP", "MAX_TIMESTAMP", "PRODUCER_ID", "PRODUCER_EPOCH",
        "BASE_SEQUENCE", "RECORDS_COUNT",
    ]
    position = 0
    for name in fields:
        assert getattr(_format, f"{name}_OFFSET") == position, name
        position += getattr(_format, f"{name}_LENGTH")
    assert position == _format.RECORDS_OFFSET == _format.RECORD_BATCH_OVERHEAD == _format.V2_HEADER.size
    assert _format.LOG_OVERHEAD == _format.LOG_HEADER.size == _format.LENGTH_OFFSET + _format.LENGTH_LENGTH
    legacy = ["LEGACY_CRC", "LEGACY_MAGIC", "LEGACY_ATTRIBUTES", "LEGACY_TIMESTAMP"]
    position = 0
    for name in legacy:
        assert getattr(_format, f"{name}_OFFSET") == position, name
        position += getattr(_format, f"{name}_LENGTH")
    assert position == _format.LEGACY_KEY_SIZE_OFFSET_V1
    assert _format.RECORD_OVERHEAD_V1 - _format.RECORD_OVERHEAD_V0 == _format.LEGACY_TIMESTAMP_LENGTH
