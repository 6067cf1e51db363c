"""Kafka's RackAwareTaskAssignorTest scenarios."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from helpers import assignor_for, client, groups_of, pid, snapshot, task, tasks

from lazyconv.assignment._assignor import (
    RackAwareTaskAssignor,
    client_tag_aware_predicate,
)
from lazyconv.assignment._errors import AssignmentError
from lazyconv.assignment._ids import TaskId, TopicPartition
from lazyconv.assignment._state import ClientState

STRATEGIES = ["min_traffic", "balance_subtopology"]
STATEFUL, STATELESS = (10, 1), (1, 0)

RACKS_10_4 = {
    task("0_0"): ["rack0", "rack1"],
    task("0_1"): ["rack1", "rack2"],
    task("1_0"): ["rack0", "rack2"],
    task("1_1"): ["rack1", "rack3"],
}
CLIENT_RACKS = {pid(1): "rack0", pid(2): "rack1", pid(3): "rack2", pid(4): "rack3", pid(5): "rack4"}


# -- enable check -----------------------------------------------------------------------------


def _assignor(consumers, cluster, describe=None, strategy="min_traffic", standbys=0, changelogs=None):
    t00 = task("0_0")
    return RackAwareTaskAssignor(
        consumer_racks=consumers,
        partitions_for_task={t00: {TopicPartition("topic0", 0)}},
        changelog_partitions_for_task={t00: {TopicPartition("store-0-changelog", 0)}} if changelogs is None else changelogs,
        tasks_for_subtopology=groups_of([t00]),
        cluster_replica_racks=cluster,
        describe_topics=describe,
        strategy=strategy,
        num_standby_replicas=standbys,
    )


TP = TopicPartition("topic0", 0)
GOOD = {pid(1): ["rack1"]}


def _counting_describe(result):
    calls = []

    def describe(topics):
        calls.append(list(topics))
        if isinstance(result, Exception):
            raise result
        return {t: result[t] for t in topics if t in result}

    return describe, calls


def test_disabled_by_strategy_none_without_lookups():
    describe, calls = _counting_describe({})
    assignor = _assignor(GOOD, {TP: None}, describe, strategy="none")
    assert assignor.can_enable() is False
    assert calls == []


def test_partition_missing_from_metadata():
    assert _assignor(GOOD, {}).can_enable() is False


def test_replica_without_rack():
    assert _assignor(GOOD, {TP: ["rack1", None]}).can_enable() is False


@pytest.mark.parametrize(
    "consumers",
    [{pid(1): [None]}, {pid(1): []}, {pid(1): ["rack1", "rack2"]}],
    ids=["consumer-without-rack", "process-without-consumers", "consumers-on-different-racks"],
)
def test_invalid_client_racks(consumers):
    assignor = _assignor(consumers, {TP: ["rack1"]})
    assert assignor.valid_client_racks is False
    assert assignor.can_enable() is False


def test_rack_map_and_metadata_racks_enable_and_cache():
    describe, calls = _counting_describe({"topic0": {0: ["rack1", "rack2"]}})
    assignor = _assignor(GOOD, {TP: ["rack1", "rack2"]}, describe)
    assert assignor.racks_for_process == {pid(1): "rack1"}
    assert assignor.can_enable() is True
    assert calls == []
    assert assignor.racks_for_partition == {TP: {"rack1", "rack2"}}


def test_empty_replica_list_is_described_once_and_cached():
    describe, calls = _counting_describe({"topic0": {0: ["rack1", "rack2"]}})
    assignor = _assignor(GOOD, {TP: []}, describe)
    assert assignor.can_enable() is True
    assert assignor.can_enable() is True
    assert calls == [["topic0"]]


def test_standby_describes_changelog_too():
    describe, calls = _counting_describe({"store-0-changelog": {0: ["rack1", "rack2"]}})
    assignor = _assignor(GOOD, {TP: ["rack1", "rack2"]}, describe, standbys=1)
    assert assignor.can_enable() is True
    assert assignor.racks_for_partition == {
        TP: {"rack1", "rack2"},
        TopicPartition("store-0-changelog", 0): {"rack1", "rack2"},
    }


def test_changelog_describe_failure_disables():
    describe, calls = _counting_describe(RuntimeError("timeout"))
    assert _assignor(GOOD, {TP: ["rack1"]}, describe, standbys=1).can_enable() is False
    assert calls == [["store-0-changelog"]]


def test_input_describe_failure_disables_without_changelog_lookup():
    describe, calls = _counting_describe(RuntimeError("timeout"))
    assert _assignor(GOOD, {TP: None}, describe, standbys=1).can_enable() is False
    assert calls == [["topic0"]]


# -- active tasks -----------------------------------------------------------------------------


def _three_clients(strategy, assignment):
    assignor = assignor_for({p: CLIENT_RACKS[p] for p in (pid(1), pid(2), pid(3))}, RACKS_10_4, strategy=strategy)
    clients = [client(n, CLIENT_RACKS[pid(n)], active) for n, active in assignment.items()]
    return assignor, clients


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_empty_task_set_costs_nothing(strategy):
    assignor, clients = _three_clients(strategy, {1: ["0_1"], 2: [], 3: []})
    before = snapshot(clients)
    assert assignor.optimize_active_tasks([], clients, 10, 1) == 0
    assert snapshot(clients) == before


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(("costs", "before", "after"), [(STATEFUL, 40, 4), (STATELESS, 4, 0)])
def test_optimize_active_tasks_10_4(strategy, costs, before, after):
    assignor, clients = _three_clients(strategy, {1: ["0_1", "1_1"], 2: ["1_0"], 3: ["0_0"]})
    all_tasks = tasks("0_0", "0_1", "1_0", "1_1")
    assert assignor.active_tasks_cost(all_tasks, clients, *costs) == before
    assert assignor.optimize_active_tasks(all_tasks, clients, *costs) == after
    assert snapshot(clients) == {
        pid(1): (["0_0", "1_0"], []),
        pid(2): (["1_1"], []),
        pid(3): (["0_1"], []),
    }


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_zero_traffic_cost_keeps_min_traffic_assignment(strategy):
    assignor, clients = _three_clients(strategy, {1: ["0_1", "1_1"], 2: ["1_0"], 3: ["0_0"]})
    original = snapshot(clients)
    all_tasks = tasks("0_0", "0_1", "1_0", "1_1")
    assert assignor.active_tasks_cost(all_tasks, clients, 0, 1) == 0
    cost = assignor.optimize_active_tasks(all_tasks, clients, 0, 1)
    if strategy == "min_traffic":
        assert cost == 0 and snapshot(clients) == original
    else:
        assert sorted(t for c in clients for t in map(str, c.active)) == ["0_0", "0_1", "1_0", "1_1"]
        assert [len(c.active) for c in clients] == [2, 1, 1]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(
    ("assignment", "expected"),
    [
        ({1: [], 2: ["1_0"], 3: ["0_0"]}, {1: [], 2: ["0_0"], 3: ["1_0"]}),
        ({1: [], 2: ["0_1", "1_0"], 3: ["0_0"]}, {1: [], 2: ["0_0", "0_1"], 3: ["1_0"]}),
    ],
)
@pytest.mark.parametrize(("costs", "before", "after"), [(STATEFUL, 20, 2), (STATELESS, 2, 0)])
def test_more_clients_than_needed(strategy, assignment, expected, costs, before, after):
    assignor, clients = _three_clients(strategy, assignment)
    ids = [t for c in clients for t in c.active]
    assert assignor.active_tasks_cost(ids, clients, *costs) == before
    assert assignor.optimize_active_tasks(ids, clients, *costs) == after
    assert {c.process_id: sorted(map(str, c.active)) for c in clients} == {pid(n): v for n, v in expected.items()}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(("costs", "cost"), [(STATEFUL, 10), (STATELESS, 1)])
def test_balance_subtopology_can_cost_more(strategy, costs, cost):
    racks = {t: RACKS_10_4[t] for t in tasks("0_0", "0_1", "1_1")}
    assignor = assignor_for({pid(2): "rack1", pid(5): "rack4"}, racks, strategy=strategy)
    clients = [client(2, "rack1", ["0_0", "1_1"]), client(5, "rack4", ["0_1"])]
    ids = tasks("0_0", "0_1", "1_1")
    assert assignor.active_tasks_cost(ids, clients, *costs) == cost
    assert assignor.optimize_active_tasks(ids, clients, *costs) == cost
    if strategy == "balance_subtopology" and costs == STATELESS:
        # Same cost, a different optimum: balance starts from a max flow, not the input.
        assert snapshot(clients) == {pid(2): (["0_0", "0_1"], []), pid(5): (["1_1"], [])}
    else:
        assert snapshot(clients) == {pid(2): (["0_0", "1_1"], []), pid(5): (["0_1"], [])}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_errors_from_the_before_cost(strategy):
    assignor = assignor_for(
        {pid(1): "rack0", pid(2): "rack1", pid(5): "rack4"}, RACKS_10_4, strategy=strategy, enable=False
    )
    clients = [client(1, "rack0", ["0_0", "0_1"]), client(2, "rack1", ["1_0", "1_1"])]
    with pytest.raises(AssignmentError, match="topic0-0 has no rack information"):
        assignor.optimize_active_tasks(tasks("0_0", "0_1", "1_0", "1_1"), clients, 10, 1)
    assert assignor.can_enable()
    clients = [client(1, "rack0", ["0_0", "0_1"]), client(2, "rack1", ["1_0", "1_1"]), client(5, "rack4", ["1_1"])]
    with pytest.raises(AssignmentError, match=f"task 1_1 is assigned to multiple clients: {pid(5)}, {pid(2)}"):
        assignor.optimize_active_tasks(tasks("0_0", "0_1", "1_0", "1_1"), clients, 10, 1)
    clients = [client(1, "rack0", ["0_0", "0_1"]), client(2, "rack1", ["1_1"])]
    with pytest.raises(AssignmentError, match="task 1_0 is not assigned to any client"):
        assignor.optimize_active_tasks(tasks("0_0", "0_1", "1_0", "1_1"), clients, 10, 1)


def _random_active_case(seed: int, strategy: str):
    """40 subtopologies x 3 partitions, 30 clients with 4 tasks each, random racks."""
    rng = random.Random(seed)
    racks = [f"rack{i}" for i in range(5)]
    ids = [TaskId(s, p) for s in range(40) for p in range(3)]
    input_racks = {t: rng.sample(racks, rng.randint(1, 2)) for t in ids}
    client_racks = {pid(n): rng.choice(racks) for n in range(1, 31)}
    assignor = assignor_for(client_racks, input_racks, strategy=strategy)
    shuffled = ids[:]
    rng.shuffle(shuffled)
    clients = [ClientState(pid(n), client_racks[pid(n)], 1, shuffled[4 * (n - 1) : 4 * n]) for n in range(1, 31)]
    return assignor, clients, ids


@pytest.mark.parametrize(
    "strategy", ["min_traffic", pytest.param("balance_subtopology", marks=pytest.mark.slow)]
)
@pytest.mark.parametrize(("costs"), [STATEFUL, STATELESS])
def test_random_large_case_keeps_counts_and_lowers_cost(strategy, costs):
    assignor, clients, ids = _random_active_case(7, strategy)
    before = assignor.active_tasks_cost(ids, clients, *costs)
    cost = assignor.optimize_active_tasks(ids, clients, *costs)
    assert cost <= before
    assert [len(c.active) for c in clients] == [4] * 30
    assert sorted(t for c in clients for t in c.active) == sorted(ids)
    if strategy == "balance_subtopology":
        for c in clients:  # ceil(4/120*3) = 1: at most one task per subtopology per client
            assert max(Counter(t.subtopology for t in c.active).values()) == 1


# -- standby tasks ----------------------------------------------------------------------------


def test_no_standbys_cost_nothing():
    assignor = assignor_for(CLIENT_RACKS, RACKS_10_4, {task("1_0"): ["rack0"]}, num_standby_replicas=1)
    clients = [client(1, "rack0", ["0_0"]), client(2, "rack1", ["0_1"])]
    assert assignor.optimize_standby_tasks(clients, 10, 1) == 0


def test_standby_pair_swap_10_6():
    changelogs = {task("0_0"): ["rack0"], task("0_1"): ["rack0"], task("1_0"): ["rack0", "rack2"], task("1_1"): ["rack1", "rack3"]}
    assignor = assignor_for(CLIENT_RACKS, RACKS_10_4, changelogs, num_standby_replicas=1)
    clients = [
        client(1, "rack0", ["0_0"], ["1_1", "0_1"]),
        client(2, "rack1", ["0_1"], ["1_0", "0_0"]),
    ]
    # 1_1 on PID_1 and 1_0 on PID_2 cross racks (10 each), 0_0 on PID_2 too (10)
    assert assignor.standby_tasks_cost(clients, 10, 1) == 30
    # the pair graph: tasks [1_0, 1_1], cost 20 -> 2 by swapping them; 0_0 / 0_1 are not movable
    assert assignor.optimize_standby_tasks(clients, 10, 1) == 10
    assert snapshot(clients) == {pid(1): (["0_0"], ["0_1", "1_0"]), pid(2): (["0_1"], ["0_0", "1_1"])}


CHANGELOG_10_7 = {
    task("0_0"): ["rack0", "rack1"],
    task("0_1"): ["rack1", "rack2"],
    task("0_2"): ["rack1", "rack2"],
    task("1_0"): ["rack0", "rack2"],
    task("1_1"): ["rack1", "rack3"],
    task("1_2"): ["rack0", "rack1"],
}
RACKS_10_7 = {pid(1): "rack0", pid(2): "rack1", pid(3): "rack2", pid(4): "rack3", pid(6): "rack0", pid(7): "rack1"}


def _clients_10_7():
    return [
        client(1, "rack0", ["0_0"], ["0_1", "1_1"]),
        client(2, "rack1", ["0_1"], ["0_0", "1_0"]),
        client(3, "rack2", ["1_0"], ["0_0", "0_2"]),
        client(4, "rack3", ["1_1"], ["0_1", "1_2"]),
        client(6, "rack0", ["0_2"], ["1_0", "1_2"]),
        client(7, "rack1", ["1_2"], ["0_2", "1_1"]),
    ]


def test_standby_scenario_10_7_always_allowed():
    input_racks = {t: ["rack0"] for t in CHANGELOG_10_7}
    assignor = assignor_for(RACKS_10_7, input_racks, CHANGELOG_10_7, num_standby_replicas=2)
    clients = _clients_10_7()
    assert assignor.standby_tasks_cost(clients, 10, 1) == 60
    assert assignor.optimize_standby_tasks(clients, 10, 1) == 20
    assert {p: s for p, (_, s) in snapshot(clients).items()} == {
        pid(1): ["1_0", "1_2"],
        pid(2): ["0_0", "1_1"],
        pid(3): ["0_1", "0_2"],
        pid(4): ["0_0", "0_1"],
        pid(6): ["1_0", "1_2"],
        pid(7): ["0_2", "1_1"],
    }


def test_standby_scenario_10_7_rack_as_tag():
    input_racks = {t: ["rack0"] for t in CHANGELOG_10_7}
    assignor = assignor_for(RACKS_10_7, input_racks, CHANGELOG_10_7, num_standby_replicas=2)
    clients = _clients_10_7()
    counts = {c.process_id: len(c.standby) for c in clients}
    predicate = client_tag_aware_predicate({p: {("rack", r)} for p, r in RACKS_10_7.items()})
    assert assignor.optimize_standby_tasks(clients, 10, 1, predicate) == 50
    assert {c.process_id: len(c.standby) for c in clients} == counts
    for t in CHANGELOG_10_7:
        holders = [RACKS_10_7[c.process_id] for c in clients if c.has_assigned(t)]
        assert len(holders) == len(set(holders)), t
    # only (PID_3, PID_4) swapped: 0_0 <-> 0_1
    assert {p: s for p, (_, s) in snapshot(clients).items()}[pid(3)] == ["0_1", "0_2"]
    assert {p: s for p, (_, s) in snapshot(clients).items()}[pid(4)] == ["0_0", "1_2"]


@pytest.mark.slow  # over a second: kept out of the quick look
def test_random_standbys_keep_counts_and_rack_distinctness():
    rng = random.Random(3)
    racks = [f"rack{i}" for i in range(6)]
    ids = [TaskId(s, p) for s in range(10) for p in range(5)]
    client_racks = {pid(n): racks[n % 6] for n in range(1, 51)}
    changelog = {t: rng.sample(racks, 2) for t in ids}
    assignor = assignor_for(client_racks, {t: ["rack0"] for t in ids}, changelog, num_standby_replicas=3)
    clients = {p: ClientState(p, r) for p, r in client_racks.items()}
    order = list(clients)
    for k, t in enumerate(ids):
        clients[order[k % 50]].active.add(t)
        by_rack: dict[str, list[str]] = {}
        for p in order:
            if p != order[k % 50] and client_racks[p] != client_racks[order[k % 50]]:
                by_rack.setdefault(client_racks[p], []).append(p)
        for r in rng.sample(sorted(by_rack), 3):
            clients[rng.choice(by_rack[r])].standby.add(t)
    states = list(clients.values())
    counts = {c.process_id: len(c.standby) for c in states}
    predicate = client_tag_aware_predicate({p: {("rack", r)} for p, r in client_racks.items()})
    before = assignor.standby_tasks_cost(states, 10, 1)
    after = assignor.optimize_standby_tasks(states, 10, 1, predicate)
    assert after <= before
    assert {c.process_id: len(c.standby) for c in states} == counts
    for t in ids:
        holders = [client_racks[c.process_id] for c in states if c.has_assigned(t)]
        assert len(holders) == 4 and len(set(holders)) == 4


@pytest.mark.parametrize(
    ("strategy", "after", "expected"),
    [
        ("min_traffic", 2, {pid(1): (["0_0", "0_1"], []), pid(2): (["1_0", "1_1"], [])}),
        ("balance_subtopology", 20, {pid(1): (["0_0", "1_0"], []), pid(2): (["0_1", "1_1"], [])}),
    ],
)
def test_min_traffic_versus_balance_subtopology_10_5(strategy, after, expected):
    racks = {task("0_0"): ["r0"], task("0_1"): ["r0"], task("1_0"): ["r1"], task("1_1"): ["r1"]}
    assignor = assignor_for({pid(1): "r0", pid(2): "r1"}, racks, strategy=strategy)
    clients = [client(1, "r0", ["0_0", "1_0"]), client(2, "r1", ["0_1", "1_1"])]
    ids = tasks("0_0", "0_1", "1_0", "1_1")
    assert assignor.active_tasks_cost(ids, clients, 10, 1) == 20
    assert assignor.optimize_active_tasks(ids, clients, 10, 1) == after
    assert snapshot(clients) == expected


def test_moving_an_active_onto_its_standby_is_an_error():
    """Actives are optimized before standbys exist; Kafka's ClientState refuses this."""
    racks = {task("0_0"): ["r1"], task("0_1"): ["r0"]}
    assignor = assignor_for({pid(1): "r0", pid(2): "r1"}, racks)
    clients = [client(1, "r0", ["0_0"], ["0_1"]), client(2, "r1", ["0_1"])]
    with pytest.raises(AssignmentError, match="task 0_1 is already assigned to client"):
        assignor.optimize_active_tasks(tasks("0_0", "0_1"), clients, 10, 1)
