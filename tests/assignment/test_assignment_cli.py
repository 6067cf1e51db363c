"""``lazyconv assign``: the JSON formats of issue 9, errors with JSON paths."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lazyconv._cli import main

# Spec 10.4 as a document (traffic 10 / non-overlap 1 by default): 40 -> 4.
DOC = {
    "clients": [
        {"id": "00000000-0000-0000-0000-000000000003", "rack": "rack2", "threads": 1},
        {"id": "00000000-0000-0000-0000-000000000001", "rack": "rack0", "threads": 2},
        {"id": "00000000-0000-0000-0000-000000000002", "rack": "rack1"},
    ],
    "tasks": [
        {"id": tid, "subtopology": int(tid[0]), "stateful": True,
         "partitions": [{"topic": f"topic{tid}", "partition": 0, "replica_racks": racks}],
         "changelog_partitions": [{"topic": f"store-{tid}-changelog", "partition": 0, "replica_racks": racks}]}
        for tid, racks in (("0_0", ["rack0", "rack1"]), ("0_1", ["rack1", "rack2"]),
                           ("1_0", ["rack0", "rack2"]), ("1_1", ["rack1", "rack3"]))
    ],
    "current": {
        "00000000-0000-0000-0000-000000000001": {"active": ["0_1", "1_1"], "standby": []},
        "00000000-0000-0000-0000-000000000002": {"active": ["1_0"], "standby": []},
        "00000000-0000-0000-0000-000000000003": {"active": ["0_0"]},
    },
    "num_standby_replicas": 0,
    "traffic_cost": None,
    "non_overlap_cost": None,
}
EXPECTED = {
    "assignment": {
        "00000000-0000-0000-0000-000000000001": {"active": ["0_0", "1_0"], "standby": []},
        "00000000-0000-0000-0000-000000000002": {"active": ["1_1"], "standby": []},
        "00000000-0000-0000-0000-000000000003": {"active": ["0_1"], "standby": []},
    },
    "cost": {"before": 40, "after": 4},
}


def run_cli(tmp_path, capsys, doc, *options):
    path = tmp_path / "input.json"
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    status = main(["assign", str(path), *options])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("strategy", ["min_traffic", "balance_subtopology"])
def test_cli_prints_the_assignment_and_costs(tmp_path, capsys, strategy):
    status, out, err = run_cli(tmp_path, capsys, DOC, "--strategy", strategy)
    assert status == 0, err
    assert json.loads(out) == EXPECTED


def test_cli_costs_and_assignor_defaults(tmp_path, capsys):
    doc = dict(DOC, traffic_cost=1, non_overlap_cost=0)
    status, out, _ = run_cli(tmp_path, capsys, doc)
    assert status == 0 and json.loads(out)["cost"] == {"before": 4, "after": 0}
    # sticky defaults: traffic 1, non-overlap 10 -> moving is never worth it here
    status, out, _ = run_cli(tmp_path, capsys, DOC, "--assignor", "sticky", "--details")
    result = json.loads(out)
    assert result["cost"] == {"before": 4, "after": 4}
    assert result["phases"][0] == {
        "phase": "stateful_active", "traffic_cost": 1, "non_overlap_cost": 10, "before": 4, "after": 4, "moved": 0,
    }


def test_cli_standbys_are_optimized_and_role_swapped(tmp_path, capsys):
    doc = copy.deepcopy(DOC)
    doc["num_standby_replicas"] = 1
    doc["current"]["00000000-0000-0000-0000-000000000002"]["standby"] = ["0_0"]
    doc["current"]["00000000-0000-0000-0000-000000000003"]["standby"] = ["1_1"]
    status, out, err = run_cli(tmp_path, capsys, doc, "--details")
    assert status == 0, err
    result = json.loads(out)
    holders = {t: [c for c, held in result["assignment"].items() if t in held["active"] + held["standby"]] for t in ("0_0", "1_1")}
    assert all(len(set(v)) == 2 for v in holders.values())  # never active and standby on one client
    assert [p["phase"] for p in result["phases"]] == ["stateful_active", "stateless_active", "standby"]
    standby_counts = sorted(len(h["standby"]) for h in result["assignment"].values())
    assert sum(standby_counts) == 2


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["clients"][1].pop("rack"), "$.clients[1].rack: missing required field"),
        (lambda d: d["clients"][1].update(threads=0), "$.clients[1].threads: must be >= 1"),
        (lambda d: d["tasks"][2].update(id="x"), "$.tasks[2].id: task id 'x' is not of the form"),
        (lambda d: d["tasks"][0]["partitions"][0].update(replica_racks=[]), "$.tasks[0].partitions[0].replica_racks: at least one"),
        (lambda d: d["tasks"][0]["partitions"][0].update(partition="0"), "$.tasks[0].partitions[0].partition: expected an integer"),
        (lambda d: d.update(trafic_cost=3), "$.trafic_cost: unknown field"),
        (lambda d: d.update(traffic_cost=-1), "$.traffic_cost: must be >= 0"),
        (lambda d: d["current"]["00000000-0000-0000-0000-000000000002"]["active"].append("0_0"),
         "$.current.00000000-0000-0000-0000-000000000003.active[0]: task '0_0' is already active on client "
         "'00000000-0000-0000-0000-000000000002'"),
        (lambda d: d["current"]["00000000-0000-0000-0000-000000000003"].update(active=[]), "$.tasks[0]: task '0_0' is not active on any client"),
        (lambda d: d["current"]["00000000-0000-0000-0000-000000000003"].update(standby=["0_1"]),
         "standby tasks given but num_standby_replicas is 0"),
        (lambda d: d["current"].update(nobody={"active": []}), "$.current.nobody: unknown client"),
        (lambda d: d["tasks"][1].update(subtopology=3), "$.tasks[1].subtopology: 3 does not match"),
    ],
)
def test_cli_rejects_bad_input_with_json_path(tmp_path, capsys, mutate, message):
    doc = copy.deepcopy(DOC)
    mutate(doc)
    status, out, err = run_cli(tmp_path, capsys, doc)
    assert status == 1 and out == ""
    assert message in err
    assert err.startswith("lazyconv assign: error: ")


def test_cli_rejects_invalid_json(tmp_path, capsys):
    status, _, err = run_cli(tmp_path, capsys, '{"clients": [}')
    assert status == 1 and "$: not valid JSON" in err and "line 1" in err


@pytest.mark.parametrize(
    "text, message",
    [("[" * 100_000 + "]" * 100_000, "nested too deeply"),
     ('{"clients": [], "tasks": [], "current": {}, "num_standby_replicas": ' + "9" * 5000 + "}",
      "digits")],
    ids=["deep-nesting", "5000-digit-integer"],
)
def test_cli_rejects_json_python_cannot_hold(tmp_path, capsys, text, message):
    """Deep nesting (a RecursionError: 'internal error') and an integer of more than 4300
    digits (a ValueError: exit 2) are bad data with the document's path, exit status 1."""
    status, out, err = run_cli(tmp_path, capsys, text)
    assert status == 1 and out == ""
    assert err.startswith("lazyconv assign: error: ") and "$: not valid input" in err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow  # over a second: kept out of the quick look
def test_cli_reads_stdin_in_a_subprocess():
    proc = subprocess.run(
        [sys.executable, "-m", "lazyconv._cli", "assign", "-", "--indent", "0"],
        input=json.dumps(DOC), capture_output=True, text=True, check=True,
    )
    assert json.loads(proc.stdout) == EXPECTED
    assert proc.stdout.count("\n") == 1


def test_cli_role_swap_example_reports_input_standby_cost(tmp_path, capsys):
    """Actives 0_0 / 0_1 move onto the clients holding their standbys: the standbys swap roles.

    The standby 'before' cost is the input's (0: both standbys sit in a replica rack), not the
    cost after the swap (22: both now cross racks, and both moved).
    """
    doc = json.loads((Path(__file__).parent / "example_with_standbys.json").read_text())
    status, out, err = run_cli(tmp_path, capsys, doc, "--details")
    assert status == 0, err
    result = json.loads(out)
    assert result["assignment"] == {
        "c1": {"active": ["0_0", "1_0"], "standby": ["0_1"]},
        "c2": {"active": ["1_1"], "standby": []},
        "c3": {"active": ["0_1"], "standby": ["0_0"]},
    }
    assert [(p["phase"], p["before"], p["after"], p["moved"]) for p in result["phases"]] == [
        ("stateful_active", 20, 2, 2),
        ("stateless_active", 2, 0, 2),
        ("standby", 0, 22, 2),
    ]
    assert result["cost"] == {"before": 22, "after": 24}


def test_cli_guide_example(tmp_path, capsys):
    """The example in docs/guide/assignment.md prints what the guide says."""
    import re

    guide = (Path(__file__).parents[2] / "docs" / "guide" / "assignment.md").read_text()
    doc = json.loads(re.findall(r"^```json[^\n]*\n(.*?)^```$", guide, re.M | re.S)[0])
    shown = re.findall(r"^\$ lazyconv assign input.json --indent 0\n(.*?)\n```$", guide, re.M | re.S)[0]
    assert json.loads(shown) == json.loads(
        '{"assignment": {"c1": {"active": ["0_0", "1_0"], "standby": []}, "c2": {"active": ["1_1"], '
        '"standby": []}, "c3": {"active": ["0_1"], "standby": []}}, "cost": {"before": 22, "after": 2}}'
    )
    status, out, err = run_cli(tmp_path, capsys, doc, "--indent", "0")
    assert status == 0, err
    assert out.strip() == (
        '{"assignment": {"c1": {"active": ["0_0", "1_0"], "standby": []}, "c2": {"active": ["1_1"], '
        '"standby": []}, "c3": {"active": ["0_1"], "standby": []}}, "cost": {"before": 22, "after": 2}}'
    )


def test_assign_reports_each_phase_for_the_progress_bar():
    from lazyconv.assignment._api import PHASES, assign
    from lazyconv.assignment._jsonio import parse_input

    seen = []
    doc = json.loads((Path(__file__).parent / "example_with_standbys.json").read_text())
    assign(parse_input(doc), on_phase_done=seen.append)
    assert seen == list(PHASES)


@pytest.mark.parametrize("value", ["100000000", "-1", "two"])
def test_cli_refuses_an_indent_outside_0_to_16(tmp_path, capsys, value):
    """--indent 100000000 had json.dumps build gigabytes of spaces (a MemoryError, or the
    machine out of memory); a negative one printed unindented lines."""
    with pytest.raises(SystemExit) as exit_:
        run_cli(tmp_path, capsys, DOC, "--indent", value)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "argument --indent" in err
