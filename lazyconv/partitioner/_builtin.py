"""KIP-794's built-in partitioner: strictly uniform sticky switching, optionally adaptive.

One :class:`BuiltInPartitioner` per topic, driven by an accumulator (see
:mod:`lazyconv.partitioner._accumulator` for a complete one, or drive it from any producer):

* :meth:`~BuiltInPartitioner.peek_current_partition_info` when a keyless record is appended;
* :meth:`~BuiltInPartitioner.update_partition_info` after every append with the bytes the append
  produced (the record's size, plus the 61-byte header when it opened a batch) and whether every
  batch queued for that partition is full; also with 0 bytes at the start of an append whose
  partition's batches are all full (the *pending switch* of KAFKA-14156);
* :meth:`~BuiltInPartitioner.update_partition_load_stats` from the sender's ready pass with the
  queue size (batches) of each partition, for adaptive switching.

Two switching rules are selectable: :attr:`SwitchRule.DEFERRED` (Kafka since KAFKA-14156, the default: reaching
``batch.size`` produced bytes switches only once the partition's batches are all full, and
unconditionally at twice that) and :attr:`SwitchRule.IMMEDIATE` (the rule KIP-794's text describes
and its measurements used: switch as soon as ``batch.size`` bytes were produced).
"""

from __future__ import annotations

import bisect
import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from lazyconv.errors import ConfigurationError
from lazyconv.partitioner._cluster import (
    ClusterView,
    RandomSource,
    check_cluster,
    default_random_source,
)

__all__ = ["SwitchRule", "StickyPartitionInfo", "PartitionLoadStats", "BuiltInPartitioner"]

log = logging.getLogger(__name__)

DRAW_RANGE = 1 << 31
"""A draw is uniform in ``[0, DRAW_RANGE)`` (Kafka's ``toPositive(nextInt())``)."""


class SwitchRule(str, enum.Enum):
    """When the sticky partition may change after ``batch.size`` bytes were produced."""

    IMMEDIATE = "immediate"
    """KIP-794 as written and measured (KAFKA-10888): switch as soon as the bytes are produced."""
    DEFERRED = "deferred"
    """Kafka since KAFKA-14156 (4.0.1 too): also wait until the batches are all full; 2x cap."""

    @classmethod
    def _missing_(cls, value: object) -> None:
        raise ConfigurationError(f"switch rule must be 'immediate' or 'deferred', got {value!r:.40}")


@dataclass
class StickyPartitionInfo:
    """The current sticky partition and the bytes produced to it since it was chosen."""

    partition: int
    produced_bytes: int = 0


@dataclass(frozen=True)
class PartitionLoadStats:
    """Cumulative frequency table over the included partitions (adaptive switching)."""

    cumulative_frequency_table: tuple[int, ...]
    partition_ids: tuple[int, ...]
    length: int


class BuiltInPartitioner:
    """Sticky partition choice for one topic (Kafka's ``BuiltInPartitioner``).

    ``sticky_batch_size`` is the producer's ``max(1, batch.size)``; anything below 1 is refused.
    ``random`` returns non-negative ints (Kafka draws ``toPositive(nextInt())``); tests pass a
    counter to make choices predictable.
    """

    def __init__(
        self,
        topic: str,
        sticky_batch_size: int,
        random: RandomSource | None = None,
        switch_rule: SwitchRule = SwitchRule.DEFERRED,
    ) -> None:
        if not isinstance(sticky_batch_size, int) or sticky_batch_size < 1:
            raise ConfigurationError(
                f"sticky batch size must be an int >= 1, got {sticky_batch_size!r:.40} for topic {topic!r}"
            )
        self.topic = topic
        self.sticky_batch_size = sticky_batch_size
        self.switch_rule = SwitchRule(switch_rule)
        self._random = random if random is not None else default_random_source()
        self._current: StickyPartitionInfo | None = None
        self._load_stats: PartitionLoadStats | None = None

    @property
    def load_stats(self) -> PartitionLoadStats | None:
        """The current frequency table, or ``None`` when switching is uniform."""
        return self._load_stats

    @property
    def current(self) -> StickyPartitionInfo | None:
        """The current sticky partition info (``None`` before the first keyless record)."""
        return self._current

    def next_partition(self, cluster: ClusterView) -> int:
        """Draw a partition (one random draw); the current one may be drawn again."""
        random = self._random()
        stats = self._load_stats
        if stats is None:
            try:
                available = cluster.available_partitions_for_topic(self.topic)
                if available:
                    return available[random % len(available)]
                # No leader anywhere: Kafka uses the draw directly as a partition number.
                return random % len(cluster.partitions_for_topic(self.topic))
            except AttributeError:  # not a ClusterView (None, a dict): a ConfigurationError
                check_cluster(cluster)
                raise
        table = stats.cumulative_frequency_table
        total = table[stats.length - 1]
        # Kafka keeps the table in Java ints, which wrap once the weights sum past 2**31 - 1
        # (docs/differences.md); here the sums are exact, and a total beyond one draw's range
        # takes more draws so that every weight stays reachable.
        span = DRAW_RANGE
        while span < total:
            random = random * DRAW_RANGE + self._random()
            span *= DRAW_RANGE
        weighted = random % total
        # First slot whose cumulative frequency exceeds the draw (Java's binarySearch result).
        return stats.partition_ids[bisect.bisect_right(table, weighted, 0, stats.length)]

    def peek_current_partition_info(self, cluster: ClusterView) -> StickyPartitionInfo:
        """The sticky partition to append the next keyless record to (chosen on first use)."""
        if self._current is None:
            self._current = StickyPartitionInfo(self.next_partition(cluster))
        return self._current

    def update_partition_info(
        self,
        info: StickyPartitionInfo | None,
        appended_bytes: int,
        cluster: ClusterView,
        enable_switch: bool = True,
    ) -> bool:
        """Count ``appended_bytes`` for ``info`` and switch partitions when the rule says so.

        ``info`` is ``None`` for records placed explicitly or by key (nothing is counted).
        ``enable_switch`` is "every batch in the partition's deque is full" (an empty deque
        counts); only the deferred rule looks at it. Returns whether the partition changed.
        """
        if info is None:
            return False
        if info is not self._current:
            # A stale info (the partition already changed): Kafka drops the update.
            return False
        info.produced_bytes += appended_bytes
        produced = info.produced_bytes
        limit = self.sticky_batch_size
        if self.switch_rule is SwitchRule.IMMEDIATE:
            should_switch = produced >= limit
        else:
            should_switch = (produced >= limit and enable_switch) or produced >= 2 * limit
        if should_switch:
            self._current = StickyPartitionInfo(self.next_partition(cluster))
            log.debug(
                "topic %s: switched from partition %d (%d bytes produced) to %d",
                self.topic, info.partition, produced, self._current.partition,
            )
            return True
        return False

    def update_partition_load_stats(
        self,
        queue_sizes: Sequence[int] | None,
        partition_ids: Sequence[int] | None,
        length: int,
    ) -> None:
        """Rebuild the frequency table from the ready pass's queue sizes (in batches).

        ``queue_sizes`` holds a slot per partition that has a deque; the first ``length`` slots
        (and ``partition_ids``) are the included partitions. ``None`` means "no stats" (adaptive
        off, or not every partition has a deque yet). Weights are ``max + 1 - size`` (linear,
        not ``1/size``). Equal sizes give uniform switching only if nothing was excluded.
        The running sums are exact integers: where Kafka's ``int`` table wraps past
        ``2**31 - 1`` (only with billions of queued batches), this one does not.
        """
        if queue_sizes is None or partition_ids is None:
            self._load_stats = None
            return
        if length < 1 or len(queue_sizes) < 2:
            self._load_stats = None
            return
        included = queue_sizes[:length]
        max_size_plus_one = max(included) + 1
        if length == len(queue_sizes) and all(q == included[0] for q in included):
            self._load_stats = None
            return
        table: list[int] = []
        total = 0
        for size in included:
            total += max_size_plus_one - size
            table.append(total)
        self._load_stats = PartitionLoadStats(tuple(table), tuple(partition_ids[:length]), length)
