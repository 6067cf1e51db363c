"""The wire layout of Kafka's record formats in one place: fields, offsets, sizes, struct formats.

Names follow Kafka's Java (``Records``, ``DefaultRecordBatch``, ``LegacyRecord``) and so does the
derivation: every field has a ``*_LENGTH``, and every offset is the previous field's offset plus
its length, so the numbers below are stated once, as sizes, and a field cannot drift from its
neighbours. Offsets of v2 batch fields are from the start of the batch (its base offset);
offsets of legacy message fields are from the start of the message, i.e. after the 12-byte log
header (offset, size); ``LEGACY_ENTRY_*`` are the same fields from the start of the entry.

The :class:`struct.Struct` objects that read and write headers are named here too, with the
fields they cover, and checked against the offsets when this module is imported.

This module is the only place in lazyconv where these numbers are written: everything else
(Python and C) uses the names, and ``tests/records/test_layout_literals.py`` fails on a layout
literal anywhere else. The compiled kernel gets them from ``_kernel/format.h``, which
:func:`c_header` generates (``python -m lazyconv.records._format > lazyconv/records/_kernel/format.h``);
a test checks that the header and the extension agree with this module.
"""

from __future__ import annotations

import struct
from enum import IntEnum

__all__ = [
    # the codec ids of the attributes' low 3 bits
    "Compression",
    # Records: the log header every entry starts with
    "OFFSET_OFFSET",
    "OFFSET_LENGTH",
    "SIZE_OFFSET",
    "SIZE_LENGTH",
    "LOG_OVERHEAD",
    "HEADER_SIZE_UP_TO_MAGIC",
    # DefaultRecordBatch (magic 2)
    "BASE_OFFSET_OFFSET",
    "BASE_OFFSET_LENGTH",
    "LENGTH_OFFSET",
    "LENGTH_LENGTH",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "PARTITION_LEADER_EPOCH_LENGTH",
    "MAGIC_OFFSET",
    "MAGIC_LENGTH",
    "CRC_OFFSET",
    "CRC_LENGTH",
    "ATTRIBUTES_OFFSET",
    "ATTRIBUTES_LENGTH",
    "ATTRIBUTES_LOW_BYTE_OFFSET",
    "LAST_OFFSET_DELTA_OFFSET",
    "LAST_OFFSET_DELTA_LENGTH",
    "BASE_TIMESTAMP_OFFSET",
    "BASE_TIMESTAMP_LENGTH",
    "MAX_TIMESTAMP_OFFSET",
    "MAX_TIMESTAMP_LENGTH",
    "PRODUCER_ID_OFFSET",
    "PRODUCER_ID_LENGTH",
    "PRODUCER_EPOCH_OFFSET",
    "PRODUCER_EPOCH_LENGTH",
    "BASE_SEQUENCE_OFFSET",
    "BASE_SEQUENCE_LENGTH",
    "RECORDS_COUNT_OFFSET",
    "RECORDS_COUNT_LENGTH",
    "RECORDS_OFFSET",
    "RECORD_BATCH_OVERHEAD",
    "BATCH_LENGTH_MIN",
    # DefaultRecord (a v2 record)
    "MAX_VARINT_LENGTH",
    "MAX_VARLONG_LENGTH",
    "RECORD_ATTRIBUTES_LENGTH",
    "MAX_RECORD_OVERHEAD",
    # LegacyRecord (magic 0/1)
    "LEGACY_CRC_OFFSET",
    "LEGACY_CRC_LENGTH",
    "LEGACY_MAGIC_OFFSET",
    "LEGACY_MAGIC_LENGTH",
    "LEGACY_ATTRIBUTES_OFFSET",
    "LEGACY_ATTRIBUTES_LENGTH",
    "LEGACY_TIMESTAMP_OFFSET",
    "LEGACY_TIMESTAMP_LENGTH",
    "LEGACY_KEY_SIZE_OFFSET_V0",
    "LEGACY_KEY_SIZE_OFFSET_V1",
    "LEGACY_KEY_SIZE_LENGTH",
    "LEGACY_VALUE_SIZE_LENGTH",
    "RECORD_OVERHEAD_V0",
    "RECORD_OVERHEAD_V1",
    "LEGACY_ENTRY_CRC_OFFSET",
    "LEGACY_ENTRY_MAGIC_OFFSET",
    "LEGACY_ENTRY_ATTRIBUTES_OFFSET",
    "LEGACY_ENTRY_TIMESTAMP_OFFSET",
    "LEGACY_ENTRY_KEY_SIZE_OFFSET_V0",
    "LEGACY_ENTRY_KEY_SIZE_OFFSET_V1",
    # Attributes (both formats keep the codec in bits 0-2 of the low byte)
    "COMPRESSION_CODEC_MASK",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_FLAG_MASK",
    "CONTROL_FLAG_MASK",
    "DELETE_HORIZON_FLAG_MASK",
    # struct formats
    "LOG_HEADER",
    "V2_HEADER",
    "V2_BEFORE_ATTRIBUTES",
    "V2_AFTER_CRC",
    "V2_TIMESTAMPS",
    "V2_PRODUCER_FIELDS",
    "LEGACY_HEADER",
    "LEGACY_PREFIX",
    "LEGACY_V0_BODY",
    "LEGACY_V1_BODY",
    "CONSTANTS",
    "c_header",
]

# --------------------------------------------------------------------------------------------
# Records: every entry, of any magic, starts with offset (int64) and size (int32).

OFFSET_OFFSET = 0
OFFSET_LENGTH = 8
SIZE_OFFSET = OFFSET_OFFSET + OFFSET_LENGTH
SIZE_LENGTH = 4
LOG_OVERHEAD = SIZE_OFFSET + SIZE_LENGTH

# --------------------------------------------------------------------------------------------
# DefaultRecordBatch (magic 2), from the start of the batch.

BASE_OFFSET_OFFSET = 0
BASE_OFFSET_LENGTH = 8
LENGTH_OFFSET = BASE_OFFSET_OFFSET + BASE_OFFSET_LENGTH
LENGTH_LENGTH = 4
PARTITION_LEADER_EPOCH_OFFSET = LENGTH_OFFSET + LENGTH_LENGTH
PARTITION_LEADER_EPOCH_LENGTH = 4
MAGIC_OFFSET = PARTITION_LEADER_EPOCH_OFFSET + PARTITION_LEADER_EPOCH_LENGTH
MAGIC_LENGTH = 1
CRC_OFFSET = MAGIC_OFFSET + MAGIC_LENGTH
CRC_LENGTH = 4
ATTRIBUTES_OFFSET = CRC_OFFSET + CRC_LENGTH  # the CRC-32C covers ATTRIBUTES_OFFSET .. end of batch
ATTRIBUTES_LENGTH = 2
ATTRIBUTES_LOW_BYTE_OFFSET = ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH - 1  # the only byte with meaning
LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH
LAST_OFFSET_DELTA_LENGTH = 4
BASE_TIMESTAMP_OFFSET = LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA_LENGTH
BASE_TIMESTAMP_LENGTH = 8
MAX_TIMESTAMP_OFFSET = BASE_TIMESTAMP_OFFSET + BASE_TIMESTAMP_LENGTH
MAX_TIMESTAMP_LENGTH = 8
PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + MAX_TIMESTAMP_LENGTH
PRODUCER_ID_LENGTH = 8
PRODUCER_EPOCH_OFFSET = PRODUCER_ID_OFFSET + PRODUCER_ID_LENGTH
PRODUCER_EPOCH_LENGTH = 2
BASE_SEQUENCE_OFFSET = PRODUCER_EPOCH_OFFSET + PRODUCER_EPOCH_LENGTH
BASE_SEQUENCE_LENGTH = 4
RECORDS_COUNT_OFFSET = BASE_SEQUENCE_OFFSET + BASE_SEQUENCE_LENGTH
RECORDS_COUNT_LENGTH = 4
RECORDS_OFFSET = RECORDS_COUNT_OFFSET + RECORDS_COUNT_LENGTH
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET
BATCH_LENGTH_MIN = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD  # the smallest Length field (no records)

# --------------------------------------------------------------------------------------------
# DefaultRecord (a v2 record): length (varint), attributes (int8), timestamp delta (varlong),
# offset delta (varint), key, value, headers. At most MAX_RECORD_OVERHEAD bytes besides the
# key, value and headers (Kafka's DefaultRecord.MAX_RECORD_OVERHEAD).

MAX_VARINT_LENGTH = 5
MAX_VARLONG_LENGTH = 10
RECORD_ATTRIBUTES_LENGTH = 1
MAX_RECORD_OVERHEAD = MAX_VARINT_LENGTH + RECORD_ATTRIBUTES_LENGTH + MAX_VARLONG_LENGTH + MAX_VARINT_LENGTH

# --------------------------------------------------------------------------------------------
# LegacyRecord (magic 0/1), from the start of the message (after the log header).

LEGACY_CRC_OFFSET = 0
LEGACY_CRC_LENGTH = 4
LEGACY_MAGIC_OFFSET = LEGACY_CRC_OFFSET + LEGACY_CRC_LENGTH
LEGACY_MAGIC_LENGTH = 1
LEGACY_ATTRIBUTES_OFFSET = LEGACY_MAGIC_OFFSET + LEGACY_MAGIC_LENGTH
LEGACY_ATTRIBUTES_LENGTH = 1
LEGACY_TIMESTAMP_OFFSET = LEGACY_ATTRIBUTES_OFFSET + LEGACY_ATTRIBUTES_LENGTH  # magic 1 only
LEGACY_TIMESTAMP_LENGTH = 8
LEGACY_KEY_SIZE_OFFSET_V0 = LEGACY_ATTRIBUTES_OFFSET + LEGACY_ATTRIBUTES_LENGTH
LEGACY_KEY_SIZE_OFFSET_V1 = LEGACY_TIMESTAMP_OFFSET + LEGACY_TIMESTAMP_LENGTH
LEGACY_KEY_SIZE_LENGTH = 4
LEGACY_VALUE_SIZE_LENGTH = 4
# crc, magic, attributes, key size, value size (and the timestamp in v1): a message with a null
# key and a null value
RECORD_OVERHEAD_V0 = LEGACY_KEY_SIZE_OFFSET_V0 + LEGACY_KEY_SIZE_LENGTH + LEGACY_VALUE_SIZE_LENGTH
RECORD_OVERHEAD_V1 = LEGACY_KEY_SIZE_OFFSET_V1 + LEGACY_KEY_SIZE_LENGTH + LEGACY_VALUE_SIZE_LENGTH

# The same fields from the start of the entry (its log header included).
LEGACY_ENTRY_CRC_OFFSET = LOG_OVERHEAD + LEGACY_CRC_OFFSET
LEGACY_ENTRY_MAGIC_OFFSET = LOG_OVERHEAD + LEGACY_MAGIC_OFFSET
LEGACY_ENTRY_ATTRIBUTES_OFFSET = LOG_OVERHEAD + LEGACY_ATTRIBUTES_OFFSET
LEGACY_ENTRY_TIMESTAMP_OFFSET = LOG_OVERHEAD + LEGACY_TIMESTAMP_OFFSET
LEGACY_ENTRY_KEY_SIZE_OFFSET_V0 = LOG_OVERHEAD + LEGACY_KEY_SIZE_OFFSET_V0
LEGACY_ENTRY_KEY_SIZE_OFFSET_V1 = LOG_OVERHEAD + LEGACY_KEY_SIZE_OFFSET_V1

# Both formats put the magic at the same byte of an entry: a reader looks there first.
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + MAGIC_LENGTH
if LEGACY_ENTRY_MAGIC_OFFSET != MAGIC_OFFSET:  # pragma: no cover - a layout error in this file
    raise ImportError("the legacy and v2 magic bytes must be at the same entry offset")

# --------------------------------------------------------------------------------------------
# Attributes (the low byte; v2's are an int16 of which only the low byte has meaning).

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40


class ArgumentEnum(IntEnum):
    """An IntEnum whose constructor refuses a value that is none of its members with a
    :class:`~lazyconv.errors.ConfigurationError` (still the ``ValueError`` Enum raises) naming
    the members, as every bad argument is refused: ``Compression(9)``, ``TimestampType("x")``."""

    @classmethod
    def _missing_(cls, value: object) -> None:
        from lazyconv.errors import ConfigurationError  # this module imports nothing of lazyconv

        members = ", ".join(f"{member.value} ({member.name})" for member in cls)
        raise ConfigurationError(f"{value!r:.40} is not a {cls.__name__}: one of {members}")


class Compression(ArgumentEnum):
    """Kafka's codec ids (the low 3 bits of the attributes, ``COMPRESSION_CODEC_MASK``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

# --------------------------------------------------------------------------------------------
# struct formats (big-endian), each with the offset it is read at and the fields it covers.

LOG_HEADER = struct.Struct(">qi")  # at OFFSET_OFFSET: offset, size
# at BASE_OFFSET_OFFSET: base offset, length, partition leader epoch, magic, crc, attributes, last
# offset delta, base timestamp, max timestamp, producer id, producer epoch, base sequence, count
V2_HEADER = struct.Struct(">qiibIhiqqqhii")
V2_BEFORE_ATTRIBUTES = struct.Struct(">qiibI")  # at BASE_OFFSET_OFFSET: up to the CRC
V2_AFTER_CRC = struct.Struct(">hiqqqhii")  # at ATTRIBUTES_OFFSET: the header bytes the CRC covers
V2_TIMESTAMPS = struct.Struct(">qq")  # at BASE_TIMESTAMP_OFFSET: base timestamp, max timestamp
V2_PRODUCER_FIELDS = struct.Struct(">qhi")  # at PRODUCER_ID_OFFSET: producer id, epoch, base sequence
LEGACY_HEADER = struct.Struct(">qiIbb")  # at OFFSET_OFFSET: offset, size, crc, magic, attributes
LEGACY_PREFIX = struct.Struct(">qiI")  # at OFFSET_OFFSET: offset, size, crc
LEGACY_V0_BODY = struct.Struct(">bbi")  # at LEGACY_MAGIC_OFFSET (v0): magic, attributes, key size
LEGACY_V1_BODY = struct.Struct(">bbqi")  # at LEGACY_MAGIC_OFFSET (v1): magic, attributes, timestamp, key size

_STRUCT_SPANS = (  # (struct, where it starts, where it must end)
    (LOG_HEADER, OFFSET_OFFSET, LOG_OVERHEAD),
    (V2_HEADER, BASE_OFFSET_OFFSET, RECORDS_OFFSET),
    (V2_BEFORE_ATTRIBUTES, BASE_OFFSET_OFFSET, ATTRIBUTES_OFFSET),
    (V2_AFTER_CRC, ATTRIBUTES_OFFSET, RECORDS_OFFSET),
    (V2_TIMESTAMPS, BASE_TIMESTAMP_OFFSET, PRODUCER_ID_OFFSET),
    (V2_PRODUCER_FIELDS, PRODUCER_ID_OFFSET, RECORDS_COUNT_OFFSET),
    (LEGACY_HEADER, OFFSET_OFFSET, LEGACY_ENTRY_ATTRIBUTES_OFFSET + LEGACY_ATTRIBUTES_LENGTH),
    (LEGACY_PREFIX, OFFSET_OFFSET, LEGACY_ENTRY_MAGIC_OFFSET),
    (LEGACY_V0_BODY, LEGACY_MAGIC_OFFSET, LEGACY_KEY_SIZE_OFFSET_V0 + LEGACY_KEY_SIZE_LENGTH),
    (LEGACY_V1_BODY, LEGACY_MAGIC_OFFSET, LEGACY_KEY_SIZE_OFFSET_V1 + LEGACY_KEY_SIZE_LENGTH),
)
for _struct, _start, _end in _STRUCT_SPANS:
    if _start + _struct.size != _end:  # pragma: no cover - a layout error in this file
        raise ImportError(f"struct {_struct.format!r} at {_start} does not end at {_end}")
del _struct, _start, _end

# Every integer fact above, by name (what format.h defines and the kernel exports as FORMAT).
CONSTANTS: dict[str, int] = {
    name: value for name in __all__ if type(value := globals().get(name)) is int
}


def c_header() -> str:
    """The text of ``_kernel/format.h``: every constant as ``#define LC_<NAME> <value>``."""
    lines = [
        "/* Generated by `python -m lazyconv.records._format`: do not edit (see _format.py). */",
        "#ifndef LAZYCONV_FORMAT_H",
        "#define LAZYCONV_FORMAT_H",
        "",
    ]
    lines += [f"#define LC_{name} {value}" for name, value in CONSTANTS.items()]
    lines += ["", "/* X-macro over every name (the extension exports them as FORMAT). */"]
    lines += ["#define LC_FORMAT_NAMES(X) \\"]
    lines += [f"    X({name}) \\" for name in CONSTANTS]
    lines += ["", "#endif", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(c_header(), end="")
