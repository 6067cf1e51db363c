"""KIP-794's built-in partitioner: the scenarios of Kafka's BuiltInPartitionerTest and KIP-794's rules."""

from __future__ import annotations

import itertools
import re

import pytest

from lazyconv.errors import ConfigurationError
from lazyconv.partitioner import (
    BuiltInPartitioner,
    PartitioningProducer,
    ProducerConfig,
    RecordAccumulator,
    StaticCluster,
    SwitchRule,
    partition_for_key,
    to_positive,
)


def sequential():
    return itertools.count().__next__


CLUSTER3 = StaticCluster.single_topic("t", [0, 1, 2])


def test_sticky_limit_switches_after_limit_bytes():
    bp = BuiltInPartitioner("t", 3, sequential())
    first = bp.peek_current_partition_info(CLUSTER3)
    assert first.partition == 0
    for _ in range(2):
        assert not bp.update_partition_info(bp.peek_current_partition_info(CLUSTER3), 1, CLUSTER3)
        assert bp.peek_current_partition_info(CLUSTER3).partition == 0
    assert bp.update_partition_info(bp.peek_current_partition_info(CLUSTER3), 1, CLUSTER3)
    assert bp.peek_current_partition_info(CLUSTER3).partition == 1


def test_single_partition_topic_switches_onto_itself():
    cluster = StaticCluster.single_topic("t", [0])
    bp = BuiltInPartitioner("t", 1)
    for _ in range(20):
        info = bp.peek_current_partition_info(cluster)
        assert info.partition == 0
        assert bp.update_partition_info(info, 1, cluster)  # a switch that picks 0 again


def test_leaderless_partitions_are_never_chosen():
    cluster = StaticCluster({"A": {0: 0, 1: None, 2: 2}, "B": {0: None, 1: 1}, "C": {0: None}})
    chosen = {name: [] for name in "ABC"}
    for name in "ABC":
        bp = BuiltInPartitioner(name, 1)
        for _ in range(100):
            info = bp.peek_current_partition_info(cluster)
            chosen[name].append(info.partition)
            bp.update_partition_info(info, 1, cluster)
    assert 1 not in chosen["A"] and len(set(chosen["A"])) > 1
    assert set(chosen["B"]) == {1}
    assert set(chosen["C"]) == {0}


def test_no_available_partition_uses_the_draw_as_partition_number():
    cluster = StaticCluster({"t": {0: None, 1: None, 2: None}})
    bp = BuiltInPartitioner("t", 1, iter([7, 8]).__next__)
    assert bp.peek_current_partition_info(cluster).partition == 7 % 3


def test_adaptive_frequencies_match_linear_weights():
    cluster = StaticCluster.single_topic("t", [0, 1, 2, 3, 4])
    bp = BuiltInPartitioner("t", 1, sequential())
    bp.update_partition_load_stats([5, 0, 3, 0, 1], [0, 1, 2, 3, 4], 5)
    assert bp.load_stats.cumulative_frequency_table == (1, 7, 10, 16, 21)
    frequencies = [0] * 5
    for _ in range(42):
        info = bp.peek_current_partition_info(cluster)
        frequencies[info.partition] += 1
        bp.update_partition_info(info, 1, cluster)
    assert frequencies == [2, 12, 6, 12, 10]  # 2 * (6 - q), not proportional to 1/q


def test_weighted_draw_takes_first_slot_above_the_draw():
    cluster = StaticCluster.single_topic("t", [0, 1, 2])
    draws = iter(range(14))
    bp = BuiltInPartitioner("t", 1, draws.__next__)
    bp.update_partition_load_stats([1, 7, 2], [0, 1, 2], 3)
    assert bp.load_stats.cumulative_frequency_table == (7, 8, 14)
    picks = [bp.next_partition(cluster) for _ in range(14)]
    assert picks == [0] * 7 + [1] + [2] * 6
    bp2 = BuiltInPartitioner("t", 1, lambda: 21)
    bp2.update_partition_load_stats([1, 7, 2], [0, 1, 2], 3)
    assert bp2.next_partition(cluster) == 1  # 21 % 14 = 7, first entry > 7 is 8


def test_excluded_partition_gets_no_weight():
    bp = BuiltInPartitioner("t", 1)
    # partitions 0, 1, 2 with q = [2, 0, 4], partition 2 excluded
    bp.update_partition_load_stats([2, 0, 4], [0, 1, 2], 2)
    assert bp.load_stats.cumulative_frequency_table == (1, 4)
    assert bp.load_stats.partition_ids == (0, 1)


def test_all_equal_sizes_clear_stats_only_without_exclusion():
    bp = BuiltInPartitioner("t", 1)
    bp.update_partition_load_stats([3, 3, 3], [0, 1, 2], 3)
    assert bp.load_stats is None
    bp.update_partition_load_stats([3, 3, 3], [0, 1, 2], 2)  # third excluded
    assert bp.load_stats.cumulative_frequency_table == (1, 2)
    assert bp.load_stats.partition_ids == (0, 1)


def test_no_stats_for_single_partition_none_or_empty():
    bp = BuiltInPartitioner("t", 1)
    bp.update_partition_load_stats([4], [0], 1)
    assert bp.load_stats is None
    bp.update_partition_load_stats([1, 2], [0, 1], 0)
    assert bp.load_stats is None
    bp.update_partition_load_stats([1, 2], [0, 1], 2)
    assert bp.load_stats is not None
    bp.update_partition_load_stats(None, None, 0)
    assert bp.load_stats is None


def test_constructor_refuses_sticky_size_below_one():
    with pytest.raises(ConfigurationError, match="sticky batch size"):
        BuiltInPartitioner("t", 0)
    assert BuiltInPartitioner("t", 1).sticky_batch_size == 1


def test_records_not_placed_by_it_are_not_counted():
    bp = BuiltInPartitioner("t", 10, sequential())
    info = bp.peek_current_partition_info(CLUSTER3)
    assert not bp.update_partition_info(None, 1000, CLUSTER3)
    assert bp.current is info and info.produced_bytes == 0


def test_deferred_rule_waits_for_full_batches_up_to_twice_the_limit():
    bp = BuiltInPartitioner("t", 100, sequential(), SwitchRule.DEFERRED)
    info = bp.peek_current_partition_info(CLUSTER3)
    assert not bp.update_partition_info(info, 150, CLUSTER3, enable_switch=False)
    assert bp.update_partition_info(info, 0, CLUSTER3, enable_switch=True)  # pending switch
    info = bp.peek_current_partition_info(CLUSTER3)
    assert not bp.update_partition_info(info, 199, CLUSTER3, enable_switch=False)
    assert bp.update_partition_info(info, 1, CLUSTER3, enable_switch=False)  # 2x cap


def test_immediate_rule_ignores_batch_fullness():
    bp = BuiltInPartitioner("t", 100, sequential(), SwitchRule.IMMEDIATE)
    info = bp.peek_current_partition_info(CLUSTER3)
    assert bp.update_partition_info(info, 100, CLUSTER3, enable_switch=False)


def test_weights_summing_past_java_int_stay_exact_and_reachable():
    """The overflow decision (docs/differences.md): Kafka's ``int`` table wraps past 2**31 - 1.

    Queue sizes [0, 0, 2**31 - 2] weigh [2**31 - 1, 2**31 - 1, 1]: Kafka's running sums wrap
    negative; here they are exact, and the draw spans the whole total (two draws), so partition 1
    gets about half the switches instead of (with one 31-bit draw) almost none.
    """
    import random as _random

    cluster = StaticCluster.single_topic("t", [0, 1, 2])
    rng = _random.Random(7)
    bp = BuiltInPartitioner("t", 1, lambda: rng.getrandbits(31))
    big = 2**31 - 2
    bp.update_partition_load_stats([0, 0, big], [0, 1, 2], 3)
    assert bp.load_stats.cumulative_frequency_table == (2**31 - 1, 2**32 - 2, 2**32 - 1)
    picks = [bp.next_partition(cluster) for _ in range(2000)]
    assert 800 < picks.count(1) < 1200 and 800 < picks.count(0) < 1200


def test_weights_within_java_int_take_one_draw():
    draws = iter([5, 13]).__next__
    bp = BuiltInPartitioner("t", 1, draws)
    bp.update_partition_load_stats([1, 7, 2], [0, 1, 2], 3)
    assert bp.next_partition(CLUSTER3) == 0  # 5 % 14 = 5 < 7
    assert bp.next_partition(CLUSTER3) == 2  # a second call takes the second draw


def _producer_send(**overrides: object) -> object:
    arguments: dict[str, object] = dict(topic="t", key=b"k", value=b"v")
    return PartitioningProducer(StaticCluster.single_topic("t", [1, 2])).send(**{**arguments, **overrides})  # type: ignore[arg-type]


def _accumulator_append(**overrides: object) -> object:
    arguments: dict[str, object] = dict(topic="t", partition=0, key_size=1, value_size=1)
    return RecordAccumulator(StaticCluster.single_topic("t", [1])).append(**{**arguments, **overrides})  # type: ignore[arg-type]


# each: a public partitioner call given a wrong type -> the words of its ConfigurationError (was:
# a comparison's or '&''s TypeError, Enum's ValueError, AttributeError 'items' or
# 'effective_batch_size', len()'s TypeError, 'not iterable'; a str value was sized by characters)
WRONG_ARGUMENTS = {
    "partition_for_key num_partitions '3'": (lambda: partition_for_key(b"k", "3"), "num_partitions must be an int"),
    "to_positive None": (lambda: to_positive(None), "to_positive takes an int"),
    "ProducerConfig batch_size '1'": (lambda: ProducerConfig(batch_size="1"), "batch_size must be an int"),
    "ProducerConfig linger_ms None": (lambda: ProducerConfig(linger_ms=None), "linger_ms must be a number"),
    "ProducerConfig switch_rule 'x'": (lambda: ProducerConfig(switch_rule="x"), "switch rule must be"),
    "SwitchRule('x')": (lambda: SwitchRule("x"), "switch rule must be 'immediate' or 'deferred'"),
    "BuiltInPartitioner sticky_batch_size None": (lambda: BuiltInPartitioner("t", None), "sticky batch size must be"),
    "StaticCluster([1])": (lambda: StaticCluster([1]), "a StaticCluster needs"),
    "StaticCluster.single_topic leaders None": (lambda: StaticCluster.single_topic("t", None), "single_topic needs"),
    "PartitioningProducer config {}": (
        lambda: PartitioningProducer(StaticCluster.single_topic("t", [1]), {}), "config must be a ProducerConfig"),
    "RecordAccumulator config 5": (
        lambda: RecordAccumulator(StaticCluster.single_topic("t", [1]), 5), "config must be a ProducerConfig"),
    "send topic [1]": (lambda: _producer_send(topic=[1]), "topic must be a str"),
    "send key 5": (lambda: _producer_send(key=5), "a record's key must be bytes-like"),
    "send value 'text'": (lambda: _producer_send(value="text"), "a record's value must be bytes-like"),
    "send partition '0'": (lambda: _producer_send(partition="0"), "partition must be an int or None"),
    "send headers [1]": (lambda: _producer_send(headers=[1]), "headers must be (str, bytes-like or None) pairs"),
    "append key_size None": (lambda: _accumulator_append(key_size=None), "append needs a str topic and int"),
}


@pytest.mark.parametrize("case", list(WRONG_ARGUMENTS))
def test_wrong_argument_types_are_configuration_errors(case: str) -> None:
    call, says = WRONG_ARGUMENTS[case]
    with pytest.raises(ConfigurationError, match=re.escape(says)):
        call()  # type: ignore[no-untyped-call]


def _released_view() -> memoryview:
    view = memoryview(bytearray(b"key"))
    view.release()
    return view


@pytest.mark.parametrize("bad", [lambda: 42, lambda: "text", _released_view, lambda: memoryview(b"keykey")[::2]],
                         ids=["int", "str", "released view", "strided view"])
def test_the_partitioner_refuses_a_buffer_as_records_do(bad) -> None:
    """One definition of a bytes-like argument (records' byte_view): murmur2 and the
    producer's key, value and header value are refused with the records' words (the
    partitioner kept a memoryview() check of its own: a strided view was copied and hashed or
    sized, a str header value was sized by its characters)."""
    from lazyconv.partitioner import murmur2
    from lazyconv.records import MemoryRecords

    with pytest.raises(ConfigurationError) as refused:
        MemoryRecords(bad())
    reason = str(refused.value).removeprefix("records ")
    calls = {"murmur2's data": lambda: murmur2(bad()),
             "a record's key": lambda: _producer_send(key=bad()),
             "a record's value": lambda: _producer_send(value=bad()),
             "a record's header value": lambda: _producer_send(headers=[("h", bad())])}
    for what, call in calls.items():
        with pytest.raises(ConfigurationError) as caught:
            call()
        assert str(caught.value) == f"{what} {reason}"


def _cluster_calls() -> dict[str, object]:
    from lazyconv.partitioner import (
        DefaultPartitioner,
        RoundRobinPartitioner,
        StickyPartitionCache,
        UniformStickyPartitioner,
    )

    return {
        "DefaultPartitioner keyless": lambda c: DefaultPartitioner().partition("t", None, b"v", c),
        "DefaultPartitioner keyed": lambda c: DefaultPartitioner().partition("t", b"k", b"v", c),
        "DefaultPartitioner.on_new_batch": lambda c: DefaultPartitioner().on_new_batch("t", c, -1),
        "UniformStickyPartitioner": lambda c: UniformStickyPartitioner().partition("t", None, b"v", c),
        "RoundRobinPartitioner": lambda c: RoundRobinPartitioner().partition("t", None, b"v", c),
        "StickyPartitionCache": lambda c: StickyPartitionCache().partition("t", c),
        "BuiltInPartitioner.next_partition": lambda c: BuiltInPartitioner("t", 1).next_partition(c),
        "BuiltInPartitioner.peek": lambda c: BuiltInPartitioner("t", 1).peek_current_partition_info(c),
        "PartitioningProducer": lambda c: PartitioningProducer(c),
        "RecordAccumulator": lambda c: RecordAccumulator(c),
    }


@pytest.mark.parametrize("cluster", [None, 5, {"t": {0: 1}}], ids=["None", "int", "dict"])
@pytest.mark.parametrize("call", list(_cluster_calls()))
def test_a_cluster_that_is_not_a_cluster_view_is_a_configuration_error(call: str, cluster: object) -> None:
    """partition(..., cluster=None) was an AttributeError ('NoneType' object has no attribute
    'available_partitions_for_topic'); the producer and accumulator took it and failed later."""
    with pytest.raises(ConfigurationError) as refused:
        _cluster_calls()[call](cluster)  # type: ignore[operator]
    assert str(refused.value) == (f"the cluster must be a ClusterView (partitions_for_topic, "
                                  f"available_partitions_for_topic, leader_for), got {type(cluster).__name__}")


def test_an_attribute_error_inside_a_cluster_view_is_its_own() -> None:
    """Only a cluster without the methods is refused as a wrong argument: an AttributeError
    raised by a real ClusterView's own code is not hidden under that message."""
    from lazyconv.partitioner import DefaultPartitioner

    class Broken(StaticCluster):
        def available_partitions_for_topic(self, topic: str):  # type: ignore[override]
            return self.no_such_attribute  # type: ignore[attr-defined]

    with pytest.raises(AttributeError, match="no_such_attribute"):
        DefaultPartitioner().partition("t", None, b"v", Broken({"t": {0: 1}}))
