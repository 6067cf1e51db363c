"""The cost model: cross-rack traffic plus a penalty for moving a task.

For task t on client c (rack R)::

    cost = traffic_cost * |{p in partitions(t) : R not in racks(p)}| + (0 if current else non_overlap_cost)

where ``partitions(t)`` are the task's input partitions for actives and its changelog partitions
for standbys. The weights default by caller when the config leaves them unset (``None``).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

from lazyconv.assignment._errors import AssignmentError
from lazyconv.assignment._ids import TaskId, TopicPartition

__all__ = [
    "CostWeights",
    "HIGH_AVAILABILITY_DEFAULTS",
    "LEGACY_STICKY_DEFAULTS",
    "STATELESS_COSTS",
    "CALLER_DEFAULTS",
    "resolve_weights",
    "CostModel",
]


@dataclass(frozen=True)
class CostWeights:
    """Weight per cross-rack partition and weight for a task not currently on the client."""

    traffic_cost: int
    non_overlap_cost: int


#: HighAvailabilityTaskAssignor (Kafka's default): traffic 10, non-overlap 1.
HIGH_AVAILABILITY_DEFAULTS = CostWeights(10, 1)
#: LegacyStickyTaskAssignor: traffic 1, non-overlap 10.
LEGACY_STICKY_DEFAULTS = CostWeights(1, 10)
#: Stateless tasks, whatever the config: traffic 1, non-overlap 0.
STATELESS_COSTS = CostWeights(1, 0)

#: Defaults by caller name (the CLI's ``--assignor``).
CALLER_DEFAULTS: Mapping[str, CostWeights] = {
    "high_availability": HIGH_AVAILABILITY_DEFAULTS,
    "sticky": LEGACY_STICKY_DEFAULTS,
}


def resolve_weights(
    traffic_cost: int | None, non_overlap_cost: int | None, defaults: CostWeights
) -> CostWeights:
    """Configured weights, each unset (``None``) one replaced by the caller's default."""
    return CostWeights(
        defaults.traffic_cost if traffic_cost is None else traffic_cost,
        defaults.non_overlap_cost if non_overlap_cost is None else non_overlap_cost,
    )


class CostModel:
    """Kafka's ``RackAwareTaskAssignor.getCost`` over known racks and task partitions."""

    def __init__(
        self,
        racks_for_process: Mapping[str, str],
        partitions_for_task: Mapping[TaskId, Set[TopicPartition]],
        changelog_partitions_for_task: Mapping[TaskId, Set[TopicPartition]],
        racks_for_partition: Mapping[TopicPartition, Set[str]],
    ) -> None:
        self.racks_for_process = racks_for_process
        self.partitions_for_task = partitions_for_task
        self.changelog_partitions_for_task = changelog_partitions_for_task
        self.racks_for_partition = racks_for_partition
        self._cross_rack: dict[tuple[TaskId, str, bool], int] = {}

    def cross_rack_partitions(self, task: TaskId, rack: str, is_standby: bool) -> int:
        """How many of the task's (input or changelog) partitions have no replica in ``rack``."""
        key = (task, rack, is_standby)
        count = self._cross_rack.get(key)
        if count is None:
            source = self.changelog_partitions_for_task if is_standby else self.partitions_for_task
            partitions = source.get(task)
            if not partitions:
                raise AssignmentError(
                    f"task {task} has no {'changelog' if is_standby else 'input'} partitions"
                )
            count = 0
            for tp in sorted(partitions):
                racks = self.racks_for_partition.get(tp)
                if not racks:
                    raise AssignmentError(
                        f"topic partition {tp} has no rack information (was the rack-aware "
                        "assignor's enable check run first?)"
                    )
                if rack not in racks:
                    count += 1
            self._cross_rack[key] = count
        return count

    def cost(
        self,
        task: TaskId,
        process_id: str,
        in_current_assignment: bool,
        weights: CostWeights,
        is_standby: bool,
    ) -> int:
        """Cost of ``task`` on ``process_id``."""
        rack = self.racks_for_process.get(process_id)
        if rack is None:
            raise AssignmentError(
                f"client {process_id} has no rack configured (was the rack-aware assignor's enable "
                "check run first?)"
            )
        cost = weights.traffic_cost * self.cross_rack_partitions(task, rack, is_standby)
        if not in_current_assignment:
            cost += weights.non_overlap_cost
        return cost
