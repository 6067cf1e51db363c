"""The KRaft control records of ``__cluster_metadata`` segments and snapshots, as Kafka's
DumpLogSegments prints them in a record line (Kafka 3.9 and 4.0): the record's name, then the
record as the JSON of its generated ``JsonConverter`` (``SnapshotHeader {"version":0,...}``).

Declared as in Kafka 4.0.1's SnapshotHeaderRecord.json, SnapshotFooterRecord.json,
KRaftVersionRecord.json and VotersRecord.json (version 0, flexible); a record's value is read
with version 0 whatever its own ``Version`` field holds, as Kafka's ControlRecordUtils does, and
bytes after it are ignored as there. LEADER_CHANGE is not in the list: Kafka prints it as
``controlType: LEADER_CHANGE(2)``.
"""

from __future__ import annotations

import uuid
from typing import Any

from lazyconv._commands._dump_lines import camel_case
from lazyconv.logdir._topic_ids import uuid_to_text
from lazyconv.protocol._primitives import Reader
from lazyconv.protocol._schema import (
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UUID,
    ArrayOf,
    Field,
    Struct,
    walk_decode,
)

__all__ = ["kraft_control_text"]

_VERSION = Field("version", INT16)

_ENDPOINT = Struct("Endpoint", (Field("name", STRING), Field("host", STRING), Field("port", UINT16)))
_FEATURE = Struct(
    "KRaftVersionFeature",
    (Field("min_supported_version", INT16), Field("max_supported_version", INT16)),
)
_VOTER = Struct(
    "Voter",
    (
        Field("voter_id", INT32),
        Field("voter_directory_id", UUID),
        Field("endpoints", ArrayOf(_ENDPOINT)),
        Field("k_raft_version_feature", _FEATURE),
    ),
)

# control record type id -> (the name Kafka's tool prints, the record's schema)
_RECORDS: dict[int, tuple[str, Struct]] = {
    3: ("SnapshotHeader", Struct("SnapshotHeaderRecord",
                                 (_VERSION, Field("last_contained_log_timestamp", INT64)))),
    4: ("SnapshotFooter", Struct("SnapshotFooterRecord", (_VERSION,))),
    5: ("KRaftVersion", Struct("KRaftVersionRecord", (_VERSION, Field("k_raft_version", INT16)))),
    6: ("KRaftVoters", Struct("VotersRecord", (_VERSION, Field("voters", ArrayOf(_VOTER))))),
}


def kraft_control_text(type_id: int, value: bytes | None) -> str | None:
    """``SnapshotHeader {...}`` for a KRaft control record of type ``type_id`` (3 to 6) with
    this value, or None for any other type. Raises :class:`~lazyconv.errors.ProtocolError`
    when the value does not decode (Kafka's tool stops there with an exception)."""
    known = _RECORDS.get(type_id)
    if known is None:
        return None
    name, struct = known
    decoded = walk_decode(struct, Reader(value if value is not None else b""), 0, True)
    return f"{name} {_json(decoded)}"


def _json(value: Any) -> str:
    """Jackson's compact JSON of a decoded message, as the generated converters write it:
    fields in schema order named in camel case (``k_raft_version`` -> ``kRaftVersion``), a UUID as Kafka's ``Uuid.toString`` (URL-safe base64, unpadded),
    unknown tagged fields left out."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(camel_case(k))}:{_json(v)}"
                              for k, v in value.items() if not k.startswith("_")) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json(v) for v in value) + "]"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, uuid.UUID):
        return _string(uuid_to_text(value))
    return str(int(value))


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n",
                  "\f": "\\f", "\r": "\\r"}


def _string(text: str) -> str:
    """A JSON string as Jackson writes it: quote, backslash and control characters escaped
    (``\\u00XX`` in upper case), everything else as is."""
    out = []
    for char in text:
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif char < " ":
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
