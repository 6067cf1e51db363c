"""Which rack information an assignment lacks, as each of Kafka's two optimizers judges it.

Kafka does not optimize without complete rack information: it logs why and leaves the
assignment as it is. The two optimizers differ in what they require:

* ``internal`` (``RackAwareTaskAssignor.canEnableRackAwareAssignor``, used by the
  HighAvailabilityTaskAssignor): every client has a rack; every replica of every input partition
  has a rack (a replica without one disables it; so does a partition without replica
  information); with standbys, the same of every changelog partition. One check for the whole
  assignment.
* ``kip924`` (``TaskAssignmentUtils.optimizeRackAwareActiveTasks`` / ``...StandbyTasks``): every
  client has a rack, and every partition of every task has at least one replica with a rack
  (replicas without one are left out of its rack set). The active check looks at input *and*
  changelog partitions, the standby check at changelog partitions, each for its own phase.

An input partition is described by ``replica_racks``: the rack of each replica, ``None`` for a
broker without rack; an empty list means no replica information.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lazyconv.assignment._api import AssignmentInput, PartitionRacks

__all__ = ["SEMANTICS", "ACTIVE", "STANDBY", "RackGap", "rack_gaps", "known_racks"]

SEMANTICS = ("internal", "kip924")
ACTIVE, STANDBY = "active", "standby"


@dataclass(frozen=True)
class RackGap:
    """A missing piece of rack information: where (a JSON path), what, and which optimization
    phases (``active``, ``standby``) Kafka skips because of it."""

    path: str
    message: str
    scope: frozenset[str]


def known_racks(part: PartitionRacks) -> frozenset[str]:
    """The racks a partition's replicas are on (replicas without a rack left out)."""
    return frozenset(r for r in part.replica_racks if r is not None)


def _partition_gap(part: PartitionRacks, semantics: str) -> str | None:
    racks: Sequence[str | None] = part.replica_racks
    if not racks:
        return "at least one replica rack is needed (the partition has no replica information)"
    if semantics == "internal":
        missing = [k for k, r in enumerate(racks) if r is None]
        if missing:
            return f"replica {missing[0]} of {part.topic}-{part.partition} has no rack"
    elif not known_racks(part):
        return f"no replica of {part.topic}-{part.partition} has a rack"
    return None


def rack_gaps(problem: AssignmentInput, semantics: str) -> list[RackGap]:
    """Every piece of rack information ``semantics``' optimizer needs and ``problem`` lacks,
    clients first, then tasks in input order."""
    both = frozenset((ACTIVE, STANDBY))
    gaps: list[RackGap] = []
    for i, client in enumerate(problem.clients):
        if client.rack is None:
            gaps.append(RackGap(f"$.clients[{i}].rack", f"client {client.id!r} has no rack", both))
    for i, task in enumerate(problem.tasks):
        for kind, parts in (("partitions", task.partitions),
                            ("changelog_partitions", task.changelog_partitions)):
            if semantics == "internal":
                if kind == "changelog_partitions" and problem.num_standby_replicas == 0:
                    continue
                scope = both
            else:
                scope = both if kind == "changelog_partitions" else frozenset((ACTIVE,))
            for k, part in enumerate(parts):
                where = f"$.tasks[{i}].{kind}[{k}].replica_racks"
                message = _partition_gap(part, semantics)
                if message is not None:
                    gaps.append(RackGap(where, message, scope))
    return gaps
