"""A Fetch response read as a stream, sans-IO: where its record bytes start and end, without
holding them (what a relay needs to pass the records on between two sockets untouched).

:class:`FetchResponseScanner` is given the bytes at the current position of one response (after
its size and correlation id) and answers with a :class:`ScanStep`: so many bytes of framing
(fields, array lengths, tagged sections) to pass on, then so many bytes of one partition's
records; the caller passes both on, and gives it the bytes that follow. It never needs the
records themselves. The fields are read with the response's schema
(:data:`~lazyconv.protocol._fetch.FETCH_RESPONSE_SCHEMA`): the fields before each array or
records field, then (flexible versions, v12+) the struct's tagged section. Fetch v10+: the
versions whose clients read every codec Kafka 4 stores (zstd since v10), so that no batch
is ever held back from them.

A step also says where, inside its framing bytes, the fields a relay may rewrite in place are
(the error codes, the partitions' preferred read replicas and the leader ids of their
``current_leader`` tags, which name brokers): same-size rewrites keep the committed size true.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lazyconv.errors import RemoteProtocolError
from lazyconv.protocol._fetch import FETCH_RESPONSE_SCHEMA
from lazyconv.protocol._primitives import Reader
from lazyconv.protocol._schema import ArrayOf, Field, ScalarType, Struct, walk_decode

__all__ = ["FetchResponseScanner", "ScanStep", "ScannedPartition", "FIRST_SCANNED_VERSION"]

FIRST_SCANNED_VERSION = 10  # the first Fetch version whose clients read zstd
_FIRST_FLEXIBLE_VERSION = 12
_CURRENT_LEADER_TAG = 1


@dataclass
class ScannedPartition:
    """One partition's fields as a step read them; ``*_at``: positions inside that step's
    framing bytes."""

    topic: str | bytes  # the name (v12), else the topic id's 16 bytes
    partition: int
    error_code: int
    error_at: int
    records_size: int  # -1: null records
    preferred_read_replica: int
    preferred_read_replica_at: int


@dataclass
class ScanStep:
    """``framing`` bytes to pass on, then ``records`` bytes of :attr:`partition`'s records
    (0: none); ``done``: the response ends after them."""

    framing: int
    records: int
    done: bool
    partition: ScannedPartition | None = None  # whose records follow the framing
    last: bool = False  # they are the last partition's of the response
    error_at: int = -1  # the response's own error code, when this step read it
    error_code: int = 0
    partitions: list[ScannedPartition] = field(default_factory=list)  # read in this step
    #: positions of the leader ids of ``current_leader`` tags read in this step (a partition's
    #: tags follow its records, so they may be in the step after its own)
    leader_ids_at: list[int] = field(default_factory=list)


def _split(struct: Struct, version: int, at: str) -> tuple[list[Field], Field]:
    """The non-tagged fields of ``struct`` in ``version`` before the field named ``at``."""
    before: list[Field] = []
    for f in struct.fields:
        if not f.present_in(version) or f.tag is not None:
            continue
        if f.name == at:
            return before, f
        before.append(f)
    raise ValueError(f"{struct.name} v{version} has no field {at}")  # pragma: no cover


def _element(f: Field) -> Struct:
    assert isinstance(f.type, ArrayOf) and isinstance(f.type.element, Struct)
    return f.type.element


_TOPIC = _element(next(f for f in FETCH_RESPONSE_SCHEMA.fields if f.name == "responses"))
_PARTITION = _element(next(f for f in _TOPIC.fields if f.name == "partitions"))


class _NeedMore(Exception):
    """The bytes given end inside a field."""


class _Malformed(RemoteProtocolError):
    """Wrong whatever follows: not a matter of waiting for more bytes."""


class FetchResponseScanner:
    """Reads one Fetch response of ``version`` (v10+) whose frame (after the size) is
    ``frame_size`` bytes, starting right after the correlation id (see the module docstring).
    Raises :class:`~lazyconv.errors.RemoteProtocolError` for a response that does not parse or
    whose lengths run past its size."""

    def __init__(self, version: int, frame_size: int) -> None:
        if version < FIRST_SCANNED_VERSION:
            raise ValueError(f"Fetch v{version} is not scanned: only v{FIRST_SCANNED_VERSION}+")
        self.version = version
        self.flexible = version >= _FIRST_FLEXIBLE_VERSION
        self.remaining = frame_size - 4  # after the correlation id
        if self.remaining < 0:
            raise RemoteProtocolError(f"a response of {frame_size} bytes has no correlation id", 0)
        self._top_before, _ = _split(FETCH_RESPONSE_SCHEMA, version, "responses")
        self._topic_before, _ = _split(_TOPIC, version, "partitions")
        self._part_before, _ = _split(_PARTITION, version, "records")
        # where the walk is: the stack of arrays being read, by what is left in each
        self._phase = "header"
        self._topics_left = 0
        self._parts_left = 0
        self._topic: str | bytes = ""

    @property
    def done(self) -> bool:
        return self._phase == "end"

    def records_read(self, n: int) -> None:
        """``n`` bytes of records (of the last step's) were passed on."""
        self.remaining -= n
        if self.remaining < 0:
            raise RemoteProtocolError("records run past the response's size", 0)

    def scan(self, data: bytes | bytearray | memoryview) -> ScanStep | None:
        """The next step, read from ``data`` (the bytes at the current position; more than the
        step needs is fine); ``None`` when ``data`` ends inside the framing before anything
        could be passed on and more of the response is still to come."""
        view = memoryview(data)[:self.remaining]
        complete = len(view) >= self.remaining  # everything that is left is in hand
        reader = Reader(view)
        step = ScanStep(0, 0, False)
        try:
            while self._phase != "end":
                mark = reader.pos
                try:
                    if self._unit(reader, step):
                        break  # records follow
                except _Malformed:
                    raise
                except RemoteProtocolError:
                    if complete:
                        raise
                    reader.pos = mark
                    raise _NeedMore from None
                step.framing = reader.pos
        except _NeedMore:
            if step.framing == 0:
                return None
            self.remaining -= step.framing
            return step
        step.framing = reader.pos
        self.remaining -= step.framing
        if step.records > self.remaining:
            raise RemoteProtocolError(f"records of {step.records} bytes run past the response's "
                                      f"last {self.remaining}", 0)
        if self._phase == "end":
            step.done = True
            if self.remaining:
                raise RemoteProtocolError(f"{self.remaining} bytes after the end of the response", 0)
        return step

    # Each unit is all-or-nothing: the walk's state changes only once it is read whole.
    def _unit(self, r: Reader, step: ScanStep) -> bool:
        version, flexible = self.version, self.flexible
        phase = self._phase
        if phase == "header":  # the header's tagged section, the fields before the topics
            if flexible:
                _tagged_section(r, -1)
            error_at, error_code = -1, 0
            for f in self._top_before:
                if f.name == "error_code":
                    error_at = r.pos
                    error_code = r.int16("error_code")
                else:
                    _scalar(f, r, version, flexible)
            topics = self._count(r, "responses")
            step.error_at, step.error_code = error_at, error_code
            self._topics_left = topics
            self._phase = "topic" if topics else "trailer"
        elif phase == "topic":
            topic: str | bytes = ""
            for f in self._topic_before:
                value = _scalar(f, r, version, flexible)
                if f.name in ("topic", "topic_id"):
                    topic = value if isinstance(value, str) else value.bytes  # type: ignore[attr-defined]
            parts = self._count(r, "partitions")
            self._topic, self._parts_left = topic, parts
            self._phase = "partition" if parts else "topic end"
        elif phase == "partition":
            values: dict[str, object] = {}
            positions: dict[str, int] = {}
            for f in self._part_before:
                positions[f.name] = r.pos
                if isinstance(f.type, ArrayOf):  # aborted transactions: passed on as they are
                    _skip_array(f, r, version, flexible)
                else:
                    values[f.name] = _scalar(f, r, version, flexible)
            length = r.length_prefix("records", compact=flexible)
            size = -1 if length is None else length
            part = ScannedPartition(self._topic, int(values["partition_index"]),  # type: ignore[call-overload]
                                    int(values["error_code"]), positions["error_code"], size,  # type: ignore[call-overload]
                                    int(values.get("preferred_read_replica", -1)),  # type: ignore[call-overload]
                                    positions.get("preferred_read_replica", -1))
            self._phase = "partition tags"
            step.partitions.append(part)
            if size > 0:
                step.partition, step.records = part, size
                step.last = self._parts_left == 1 and self._topics_left == 1
                return True
        elif phase == "partition tags":
            leader_at = _tagged_section(r, _CURRENT_LEADER_TAG) if flexible else -1
            if leader_at >= 0:
                step.leader_ids_at.append(leader_at)
            self._parts_left -= 1
            self._phase = "partition" if self._parts_left else "topic end"
        elif phase == "topic end":
            if flexible:
                _tagged_section(r, -1)
            self._topics_left -= 1
            self._phase = "topic" if self._topics_left else "trailer"
        elif phase == "trailer":
            if flexible:
                _tagged_section(r, -1)
            self._phase = "end"
        return False

    def _count(self, r: Reader, what: str) -> int:
        """An array's length, bounded by what is left of the response (the bytes in hand may
        be only its beginning)."""
        at = r.pos
        n = r.length_prefix(what, compact=self.flexible)
        if n is None or n > self.remaining:
            raise _Malformed(f"{what} claims {n} elements in the last {self.remaining} "
                                      f"bytes of the response", at)
        return n


def _skip_array(f: Field, r: Reader, version: int, flexible: bool) -> None:
    """Read past an array field of structs (its values are not needed)."""
    element = _element(f)
    n = r.array_length(f.name, compact=flexible, nullable=f.nullable_in(version))
    for _ in range(n or 0):
        walk_decode(element, r, version, flexible)


def _scalar(f: Field, r: Reader, version: int, flexible: bool) -> object:
    t = f.type
    assert isinstance(t, ScalarType), f"{f.name} is not a scalar"
    name = t.name
    if name == "int16":
        return r.int16(f.name)
    if name == "int32":
        return r.int32(f.name)
    if name == "int64":
        return r.int64(f.name)
    if name == "uuid":
        return r.uuid(f.name)
    if name == "string":
        return r.string(f.name, compact=flexible, nullable=f.nullable_in(version))
    raise RemoteProtocolError(f"{f.name}: a {name} field is not expected here", r.pos)  # pragma: no cover


def _tagged_section(r: Reader, wanted: int) -> int:
    """Read past a tagged section; the position of tag ``wanted``'s payload (``-1``: absent)."""
    count = r.uvarint("tagged field count")
    found = -1
    previous = -1
    for _ in range(count):
        tag = r.uvarint("tag")
        if tag <= previous:
            raise r.error(f"tags are not in increasing order ({tag} after {previous})")
        previous = tag
        size = r.uvarint(f"size of tag {tag}")
        if tag == wanted and size >= 4:
            found = r.pos
        r.raw(size, f"tag {tag}")
    return found
