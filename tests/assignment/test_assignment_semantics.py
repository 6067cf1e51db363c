"""``assign``'s two options beside the internal assignor: Kafka's behaviour on missing rack
information (``missing_racks="keep"``) and KIP-924's public semantics (``semantics="kip924"``).
tests/assignment/test_kafka_assignment_differential.py compares both with Kafka's own code."""

from __future__ import annotations

import copy
import json
import pickle
from dataclasses import replace

import pytest

from lazyconv._cli import main
from lazyconv.assignment import (
    AssignmentInput,
    AssignmentInputError,
    Client,
    ClientTasks,
    MissingRacksError,
    PartitionRacks,
    Task,
    assign,
)

A = "00000000-0000-0000-0000-000000000001"
B = "00000000-0000-0000-0000-000000000002"


def problem(*, input_racks=("r1",), changelog_racks=("r0",), rack_a="r0", costs=(10, 1), standbys=0):
    """Two clients (A on r0, B on r1); tasks 0_0 on A and 0_1 on B. 0_0 reads a partition on
    ``input_racks`` with a changelog on ``changelog_racks``; 0_1 the mirror image."""
    mirror = {"r0": "r1", "r1": "r0"}

    def flip(racks):
        return tuple(mirror.get(r, r) for r in racks)

    tasks = (
        Task("0_0", 0, (PartitionRacks("in", 0, tuple(input_racks)),),
             (PartitionRacks("ch", 0, tuple(changelog_racks)),)),
        Task("0_1", 0, (PartitionRacks("in", 1, flip(input_racks)),),
             (PartitionRacks("ch", 1, flip(changelog_racks)),)),
    )
    current = {A: ClientTasks(("0_0",)), B: ClientTasks(("0_1",))}
    return AssignmentInput((Client(A, rack_a), Client(B, "r1")), tasks, current, standbys, *costs)


UNCHANGED = {A: ClientTasks(("0_0",)), B: ClientTasks(("0_1",))}
SWAPPED = {A: ClientTasks(("0_1",)), B: ClientTasks(("0_0",))}


def test_internal_semantics_count_input_partitions_only():
    # inputs on the other client's rack: the internal optimizer swaps the tasks
    assert assign(problem()).assignment == SWAPPED


def test_kip924_counts_changelog_partitions_of_active_tasks():
    """Input across racks, changelog local: one cross-rack partition either way, so moving costs
    more than staying (non-overlap 1): KIP-924 keeps what the internal optimizer swaps."""
    result = assign(problem(), semantics="kip924")
    assert result.assignment == UNCHANGED
    assert [p.before for p in result.phases[:1]] == [20]  # 0_0 and 0_1: one remote partition each
    both_remote = assign(problem(changelog_racks=("r1",)), semantics="kip924")
    assert both_remote.assignment == SWAPPED


def test_kip924_without_weights_optimizes_nothing_and_says_so():
    result = assign(problem(costs=(None, None)), semantics="kip924")
    assert result.assignment == UNCHANGED
    assert result.skipped is not None and "traffic_cost" in result.skipped
    assert result.cost_before is None and all(p.skipped for p in result.phases)
    # the internal assignor takes its defaults instead (10 / 1)
    assert assign(problem(costs=(None, None))).assignment == SWAPPED


def test_missing_client_rack_raises_by_default_and_keeps_on_request():
    bad = problem(rack_a=None)
    with pytest.raises(AssignmentInputError) as info:
        assign(bad)
    assert info.value.path == "$.clients[0].rack"
    # a library caller is told the argument that keeps the assignment; the CLI reads ``gap``
    assert isinstance(info.value, MissingRacksError)
    assert str(info.value) == (f"$.clients[0].rack: client {A!r} has no rack (missing_racks='keep' "
                               "leaves the assignment as Kafka does)")
    assert info.value.gap == f"client {A!r} has no rack"
    copy_ = pickle.loads(pickle.dumps(info.value))
    assert (str(copy_), copy_.path, copy_.gap) == (str(info.value), info.value.path, info.value.gap)
    result = assign(bad, missing_racks="keep")
    assert result.assignment == UNCHANGED
    assert result.skipped.startswith("rack-aware assignment skipped: $.clients[0].rack: client")
    assert (result.cost_before, result.cost_after) == (None, None)
    assert [p.moved for p in result.phases] == [0, 0]


@pytest.mark.parametrize("racks", [(), (None,), ("r1", None)])
def test_input_partition_without_racks_disables_the_internal_optimizer(racks):
    bad = problem(input_racks=racks)
    with pytest.raises(AssignmentInputError, match=r"\$\.tasks\[0\]\.partitions\[0\]\.replica_racks"):
        assign(bad)
    assert assign(bad, missing_racks="keep").assignment == UNCHANGED


def test_kip924_leaves_out_a_replica_without_rack():
    """("r1", None) is a partition on r1 for KIP-924 (the internal optimizer gives up)."""
    partial = problem(input_racks=("r1", None), changelog_racks=("r1",))
    assert assign(partial, semantics="kip924").assignment == SWAPPED
    assert assign(partial, missing_racks="keep").skipped is not None


def test_kip924_skips_only_the_phase_whose_racks_are_missing():
    """An input partition without racks stops KIP-924's active phases, not its standby phase."""
    doc = problem(input_racks=(), standbys=1, costs=(10, 1))
    # standbys: 0_0's on B, 0_1's on A; their changelogs live on the other rack
    doc = replace(doc, current={A: ClientTasks(("0_0",), ("0_1",)), B: ClientTasks(("0_1",), ("0_0",))})
    result = assign(doc, semantics="kip924", missing_racks="keep")
    phases = {p.phase: p for p in result.phases}
    assert phases["stateful_active"].skipped and phases["standby"].skipped is None
    assert result.skipped is None  # something was optimized
    with pytest.raises(AssignmentInputError):
        assign(doc, semantics="kip924")


def test_internal_checks_changelog_racks_only_with_standbys():
    no_standby = problem(changelog_racks=())
    assert assign(no_standby).assignment == SWAPPED
    with_standby = replace(no_standby, num_standby_replicas=1)
    assert assign(with_standby, missing_racks="keep").skipped is not None


def test_bad_option_values_are_refused():
    with pytest.raises(AssignmentInputError, match="semantics"):
        assign(problem(), semantics="public")
    with pytest.raises(AssignmentInputError, match="missing_racks"):
        assign(problem(), missing_racks="ignore")


DOC = {
    "clients": [{"id": A, "rack": None}, {"id": B, "rack": "r1"}],
    "tasks": [
        {"id": "0_0", "partitions": [{"topic": "in", "partition": 0, "replica_racks": ["r1", None]}]},
        {"id": "0_1", "partitions": [{"topic": "in", "partition": 1, "replica_racks": []}]},
    ],
    "current": {A: {"active": ["0_0"]}, B: {"active": ["0_1"]}},
}


def run_cli(tmp_path, capsys, doc, *args):
    path = tmp_path / "in.json"
    path.write_text(json.dumps(doc))
    status = main(["assign", str(path), "--quiet", "--indent", "0", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_keeps_an_assignment_without_racks_and_reports_why(tmp_path, capsys):
    status, out, err = run_cli(tmp_path, capsys, DOC, "--missing-racks", "keep", "--details")
    assert status == 0, err
    result = json.loads(out)
    assert result["assignment"] == {A: {"active": ["0_0"], "standby": []}, B: {"active": ["0_1"], "standby": []}}
    assert result["cost"] == {"before": None, "after": None}
    assert result["skipped"].startswith("rack-aware assignment skipped: $.clients[0].rack")
    assert all(p["skipped"] for p in result["phases"])


def test_cli_refuses_missing_racks_by_default(tmp_path, capsys):
    status, out, err = run_cli(tmp_path, capsys, DOC)
    assert status == 1 and out == ""
    assert "$.clients[0].rack: client" in err
    # the command names its own option, not the library's argument
    assert err.rstrip().endswith("(--missing-racks keep leaves the assignment as Kafka does)"), err
    assert "missing_racks=" not in err


def test_cli_semantics_option(tmp_path, capsys):
    doc = copy.deepcopy(DOC)
    doc["clients"][0]["rack"] = "r0"
    doc["tasks"][1]["partitions"][0]["replica_racks"] = ["r0"]
    doc.update(traffic_cost=10, non_overlap_cost=1)
    status, out, err = run_cli(tmp_path, capsys, doc, "--semantics", "kip924")
    assert status == 0, err
    assert json.loads(out)["assignment"][A]["active"] == ["0_1"]  # ["r1", None] is on r1
    status, out, err = run_cli(tmp_path, capsys, doc)  # internal: a replica without rack
    assert status == 1 and "replica 1 of in-0 has no rack" in err
