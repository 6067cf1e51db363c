"""The JSON format of ``lazyconv assign`` (input and output), with path-naming errors.

Input::

    {"clients": [{"id": "c1", "rack": "r1", "threads": 2}],
     "tasks": [{"id": "0_1", "subtopology": 0,
                "partitions": [{"topic": "t", "partition": 1, "replica_racks": ["r1", "r2"]}],
                "changelog_partitions": [...same shape...], "stateful": true}],
     "current": {"c1": {"active": ["0_1"], "standby": []}},
     "num_standby_replicas": 0, "traffic_cost": null, "non_overlap_cost": null}

A client's ``rack`` may be null (no ``client.rack``), a replica rack null (a broker without
rack) and ``replica_racks`` empty (no replica information): :func:`~lazyconv.assignment.assign`
then refuses the input or, with ``missing_racks="keep"``, leaves it as Kafka does.

``threads`` defaults to 1, ``subtopology`` to the one in the task id, ``changelog_partitions`` to
``[]``, ``stateful`` to whether the task has changelog partitions, ``num_standby_replicas`` to 0,
the costs to null (the caller's defaults). Unknown keys are errors (they are usually typos).

Output::

    {"assignment": {"c1": {"active": [...], "standby": [...]}}, "cost": {"before": N, "after": M}}

plus ``"skipped": REASON`` when Kafka would not have optimized at all (costs are null then).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, overload

from lazyconv.assignment._api import (
    AssignmentInput,
    AssignmentResult,
    Client,
    ClientTasks,
    PartitionRacks,
    Task,
)
from lazyconv.assignment._errors import AssignmentInputError
from lazyconv.assignment._ids import TaskId

__all__ = ["parse_input", "parse_text", "load_input", "result_to_json"]


def _obj(value: Any, path: str, required: set[str], optional: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise AssignmentInputError(path, f"expected an object, got {type(value).__name__}")
    for key in value:
        if key not in required and key not in optional:
            allowed = ", ".join(sorted(required | optional))
            raise AssignmentInputError(f"{path}.{key}", f"unknown field (allowed: {allowed})")
    for key in sorted(required):
        if key not in value:
            raise AssignmentInputError(f"{path}.{key}", "missing required field")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise AssignmentInputError(path, f"expected an array, got {type(value).__name__}")
    return value


@overload
def _str(value: Any, path: str, nullable: Literal[False] = False) -> str: ...
@overload
def _str(value: Any, path: str, nullable: bool) -> str | None: ...
def _str(value: Any, path: str, nullable: bool = False) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str) or not value:
        raise AssignmentInputError(
            path, f"expected a non-empty string{' or null' if nullable else ''}, got {value!r}"
        )
    return value


@overload
def _int(value: Any, path: str, minimum: int = 0, nullable: Literal[False] = False) -> int: ...
@overload
def _int(value: Any, path: str, minimum: int = 0, *, nullable: bool) -> int | None: ...
def _int(value: Any, path: str, minimum: int = 0, nullable: bool = False) -> int | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise AssignmentInputError(path, f"expected an integer{' or null' if nullable else ''}, got {value!r}")
    if value < minimum:
        raise AssignmentInputError(path, f"must be >= {minimum}, got {value}")
    return value


def _partitions(value: Any, path: str) -> tuple[PartitionRacks, ...]:
    parts = []
    for i, item in enumerate(_list(value, path)):
        where = f"{path}[{i}]"
        _obj(item, where, {"topic", "partition", "replica_racks"}, set())
        racks = _list(item["replica_racks"], f"{where}.replica_racks")
        parts.append(
            PartitionRacks(
                _str(item["topic"], f"{where}.topic"),
                _int(item["partition"], f"{where}.partition"),
                tuple(_str(r, f"{where}.replica_racks[{k}]", nullable=True) for k, r in enumerate(racks)),
            )
        )
    return tuple(parts)


def parse_input(document: Any) -> AssignmentInput:
    """Check the shape of a decoded JSON document and build an :class:`AssignmentInput`."""
    top = _obj(
        document,
        "$",
        {"clients", "tasks", "current"},
        {"num_standby_replicas", "traffic_cost", "non_overlap_cost"},
    )
    clients = []
    for i, item in enumerate(_list(top["clients"], "$.clients")):
        where = f"$.clients[{i}]"
        _obj(item, where, {"id", "rack"}, {"threads"})
        clients.append(
            Client(
                _str(item["id"], f"{where}.id"),
                _str(item["rack"], f"{where}.rack", nullable=True),
                _int(item.get("threads", 1), f"{where}.threads", minimum=1),
            )
        )
    tasks = []
    for i, item in enumerate(_list(top["tasks"], "$.tasks")):
        where = f"$.tasks[{i}]"
        _obj(item, where, {"id", "partitions"}, {"subtopology", "changelog_partitions", "stateful"})
        task_id = _str(item["id"], f"{where}.id")
        try:
            parsed = TaskId.parse(task_id)
        except Exception as exc:
            raise AssignmentInputError(f"{where}.id", str(exc)) from None
        changelogs = _partitions(item.get("changelog_partitions", []), f"{where}.changelog_partitions")
        stateful = item.get("stateful", bool(changelogs))
        if not isinstance(stateful, bool):
            raise AssignmentInputError(f"{where}.stateful", f"expected true or false, got {stateful!r}")
        tasks.append(
            Task(
                task_id,
                _int(item.get("subtopology", parsed.subtopology), f"{where}.subtopology"),
                _partitions(item["partitions"], f"{where}.partitions"),
                changelogs,
                stateful,
            )
        )
    current: dict[str, ClientTasks] = {}
    current_obj = top["current"]
    if not isinstance(current_obj, dict):
        raise AssignmentInputError("$.current", f"expected an object, got {type(current_obj).__name__}")
    for client_id, item in current_obj.items():
        where = f"$.current.{client_id}"
        _obj(item, where, set(), {"active", "standby"})
        roles = {}
        for role in ("active", "standby"):
            ids = _list(item.get(role, []), f"{where}.{role}")
            roles[role] = tuple(_str(t, f"{where}.{role}[{k}]") for k, t in enumerate(ids))
        current[client_id] = ClientTasks(roles["active"], roles["standby"])
    return AssignmentInput(
        tuple(clients),
        tuple(tasks),
        current,
        _int(top.get("num_standby_replicas", 0), "$.num_standby_replicas"),
        _int(top.get("traffic_cost"), "$.traffic_cost", nullable=True),
        _int(top.get("non_overlap_cost"), "$.non_overlap_cost", nullable=True),
    )


def load_input(path: str | Path) -> AssignmentInput:
    """Read and parse an input file (``-`` is not handled here; the CLI reads stdin itself)."""
    text = Path(path).read_text(encoding="utf-8")
    return parse_text(text)


def parse_text(text: str) -> AssignmentInput:
    """Parse JSON text; a syntax error names its line and column."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AssignmentInputError("$", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:  # json's decoder recurses once per nested array or object
        raise AssignmentInputError("$", "not valid input: arrays or objects nested too deeply") from None
    except ValueError as exc:  # an integer beyond Python's int digit limit (4300 digits)
        raise AssignmentInputError("$", f"not valid input: {exc}") from None
    return parse_input(document)


def result_to_json(result: AssignmentResult) -> dict[str, Any]:
    """The output document for a result."""
    return {
        "assignment": {
            client_id: {"active": list(tasks.active), "standby": list(tasks.standby)}
            for client_id, tasks in result.assignment.items()
        },
        "cost": {"before": result.cost_before, "after": result.cost_after},
        **({"skipped": result.skipped} if result.skipped else {}),
    }
