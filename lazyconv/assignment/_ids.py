"""Identifiers and the orders Kafka sorts them in.

Client order decides graph node ids and so which of several equal-cost optima is returned; Kafka
sorts clients by ``ProcessId``, a ``java.util.UUID`` whose ``compareTo`` compares the two 64-bit
halves as *signed* longs (unlike Python's ``uuid.UUID``, which compares unsigned 128-bit ints).
Tasks sort by (named topology, none first; subtopology; partition), subtopologies by
(subtopology id; named topology, none first). Java compares strings by UTF-16 code units.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from lazyconv.errors import ConfigurationError

__all__ = ["TopicPartition", "TaskId", "SubtopologyKey", "process_sort_key", "java_uuid_key", "subtopology_key"]

_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_TASK_RE = re.compile(r"^(?:(?P<topology>.+)_)?(?P<subtopology>\d+)_(?P<partition>\d+)$")


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def java_uuid_key(text: str) -> tuple[int, int]:
    """Sort key reproducing Java's ``UUID.compareTo`` for a canonical UUID string."""
    value = int(text.replace("-", ""), 16)
    return _signed64(value >> 64), _signed64(value & ((1 << 64) - 1))


def _java_string_key(text: str) -> bytes:
    # Big-endian UTF-16 bytes compare like Java's String.compareTo (code unit by code unit).
    return text.encode("utf-16-be", "surrogatepass")


def process_sort_key(process_id: str) -> tuple[int, int, int, bytes]:
    """Kafka's client order for a process id string.

    Canonical UUID strings (``8-4-4-4-12`` hex digits) sort as Java sorts ``ProcessId``; any other
    id sorts after all UUIDs, by Java string order (a convenience for hand-written inputs).
    """
    if not isinstance(process_id, str):
        raise ConfigurationError(f"a process id is a str, got {process_id!r:.40}")
    if _UUID_RE.match(process_id):
        msb, lsb = java_uuid_key(process_id)
        return (0, msb, lsb, b"")
    return (1, 0, 0, _java_string_key(process_id))


#: A subtopology's sort key (see :func:`subtopology_key`): tasks are grouped by it.
SubtopologyKey = tuple[int, int, bytes]


def subtopology_key(subtopology: int, topology: str | None) -> SubtopologyKey:
    """Kafka's subtopology order: id first, then named topology with "none" first."""
    return (subtopology, 0 if topology is None else 1, _java_string_key(topology or ""))


@dataclass(frozen=True)
class TopicPartition:
    """A topic partition; prints as Kafka does (``topic-0``)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    def __lt__(self, other: TopicPartition) -> bool:
        return (_java_string_key(self.topic), self.partition) < (
            _java_string_key(other.topic),
            other.partition,
        )


@functools.total_ordering
@dataclass(frozen=True, eq=True)
class TaskId:
    """Kafka's ``TaskId``: subtopology, partition and an optional named topology.

    Its string form is ``subtopology_partition`` (``topology_subtopology_partition`` with a named
    topology) and it sorts as Kafka's ``TaskId.compareTo``.
    """

    subtopology: int
    partition: int
    topology: str | None = None

    @classmethod
    def parse(cls, text: str) -> TaskId:
        """Parse ``"0_1"`` or ``"name_0_1"``; raises ConfigurationError otherwise."""
        match = _TASK_RE.match(text) if isinstance(text, str) else None
        if match is None:
            raise ConfigurationError(
                f"task id {text!r} is not of the form SUBTOPOLOGY_PARTITION or TOPOLOGY_SUBTOPOLOGY_PARTITION"
            )
        return cls(int(match["subtopology"]), int(match["partition"]), match["topology"])

    @property
    def sort_key(self) -> tuple[int, bytes, int, int]:
        if self.topology is None:
            return (0, b"", self.subtopology, self.partition)
        return (1, _java_string_key(self.topology), self.subtopology, self.partition)

    @property
    def subtopology_key(self) -> SubtopologyKey:
        return subtopology_key(self.subtopology, self.topology)

    def __lt__(self, other: TaskId) -> bool:
        return self.sort_key < other.sort_key

    def __str__(self) -> str:
        if self.topology is None:
            return f"{self.subtopology}_{self.partition}"
        return f"{self.topology}_{self.subtopology}_{self.partition}"
