"""The routing table (lazyconv.protocol._routing) against the declarations: one row per API of
KAFKA_APIS, every field path it names declared with the type its role needs, and every field of
every schema that names brokers listed (or exempted here with the reason)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lazyconv.protocol import KAFKA_API_BY_KEY, KAFKA_APIS
from lazyconv.protocol._routing import (
    BROKER_RESOURCE_TYPES,
    ROUTES,
    ApiRoute,
    FieldPath,
    NodeRole,
    Route,
    route_of,
)
from lazyconv.protocol._schema import INT8, STRING, UINT16, UUID, ArrayOf, Field, Struct

ROWS = sorted(ROUTES.values(), key=lambda row: row.key)


def _field(struct: Struct, path: FieldPath) -> tuple[Struct, Field] | None:
    """The field at ``path`` (through arrays and structs) and the struct holding it."""
    *parents, last = path
    for name in parents:
        inner = next((f.type for f in struct.fields if f.name == name), None)
        if isinstance(inner, ArrayOf):
            inner = inner.element
        if not isinstance(inner, Struct):
            return None
        struct = inner
    found = next((f for f in struct.fields if f.name == last), None)
    return None if found is None else (struct, found)


def _type_name(t: Any) -> str:
    return "[]" + _type_name(t.element) if isinstance(t, ArrayOf) else getattr(t, "name", "struct")


def test_every_kafka_api_has_one_route_and_no_other() -> None:
    assert sorted(ROUTES) == [spec.key for spec in KAFKA_APIS]
    assert {row.key: row.name for row in ROWS} == {spec.key: spec.name for spec in KAFKA_APIS}
    assert route_of(3).route is Route.ANY_BROKER
    with pytest.raises(KeyError):
        route_of(4)  # LeaderAndIsr: no Kafka 4 broker serves it


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_a_route_has_what_it_routes_by(row: ApiRoute) -> None:
    assert row.source
    if row.route in (Route.GROUP_COORDINATOR, Route.TRANSACTION_COORDINATOR):
        assert row.keys and row.coordinator_key_type == (0 if row.route is Route.GROUP_COORDINATOR else 1)
    else:
        assert row.coordinator_key_type is None
    assert bool(row.partitions) == (row.route is Route.PARTITION_LEADER)
    if row.key_when is not None:
        assert row.route is Route.NAMED_BROKER and row.keys and row.otherwise is not None
    assert row.otherwise is not row.route


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_every_routing_key_is_a_declared_request_field_of_its_kind(row: ApiRoute) -> None:
    request = KAFKA_API_BY_KEY[row.key].request
    for path in row.keys:
        found = _field(request, path)
        assert found is not None, path
        assert _type_name(found[1].type) in ("string", "[]string"), path
    for key in row.partitions:
        topic, partition = _field(request, key.topic), _field(request, key.partition)
        assert topic is not None and partition is not None, key
        assert topic[1].type in (STRING, UUID), key
        assert _type_name(partition[1].type) in ("int32", "[]int32"), key
        assert key.partition[: len(key.topic) - 1] == key.topic[:-1]  # partitions under their topic
    if row.key_when is not None:
        when = _field(request, row.key_when[0])
        assert when is not None and when[1].type is INT8
        assert row.key_when[0][:-1] == row.keys[0][:-1]  # a sibling of the key


_ROLE_TYPES = {
    NodeRole.NODE_ID: {"int32"},
    NodeRole.NODE_IDS: {"[]int32"},
    NodeRole.HOST: {"string"},
    NodeRole.PORT: {"int32", "uint16"},
    NodeRole.RACK: {"string"},
    NodeRole.NODE_ID_TEXT: {"string"},
}


@pytest.mark.parametrize("row", [r for r in ROWS if r.names_nodes], ids=lambda row: row.name)
def test_every_broker_naming_field_is_declared_with_its_roles_type(row: ApiRoute) -> None:
    spec = KAFKA_API_BY_KEY[row.key]
    for node_field in row.names_nodes:
        struct = spec.request if node_field.in_request else spec.response
        found = _field(struct, node_field.path)
        assert found is not None, node_field
        holder, f = found
        assert _type_name(f.type) in _ROLE_TYPES[node_field.role], node_field
        if node_field.role is NodeRole.PORT and f.type is UINT16:
            assert node_field.controllers  # only the KRaft voter APIs' listeners
        if node_field.when is not None:
            sibling = next(s for s in holder.fields if s.name == node_field.when[0])
            assert sibling.type is INT8 and node_field.when[1] == BROKER_RESOURCE_TYPES


# Field names that name a broker wherever they appear in Kafka's schemas ...
_BROKER_NAMES = {
    "node_id", "broker_id", "leader_id", "controller_id", "host", "port", "rack", "replica_nodes",
    "isr_nodes", "offline_replicas", "replicas", "adding_replicas", "removing_replicas",
    "broker_ids", "preferred_read_replica", "eligible_leader_replicas", "last_known_elr",
    "replica_id", "voter_id", "resource_name",
}
# ... except these, which name something else
_NOT_BROKERS = {
    (1, "request", ("replica_id",)): "the fetching follower (-1: a consumer)",
    (1, "request", ("replica_state", "replica_id")): "the fetching follower (-1: a consumer)",
    (2, "request", ("replica_id",)): "-1 for a consumer, a follower's id otherwise",
    (23, "request", ("replica_id",)): "-1 for a consumer, a follower's id otherwise",
    (29, "response", ("resources", "resource_name")): "an ACL's resource (topic, group ...)",
    (29, "response", ("resources", "acls", "host")): "an ACL's client host",
    (30, "request", ("creations", "resource_name")): "an ACL's resource",
    (30, "request", ("creations", "host")): "an ACL's client host",
    (31, "response", ("filter_results", "matching_acls", "resource_name")): "an ACL's resource",
    (31, "response", ("filter_results", "matching_acls", "host")): "an ACL's client host",
}


def _named_fields(struct: Struct, prefix: FieldPath = ()) -> list[FieldPath]:
    found: list[FieldPath] = []
    for f in struct.fields:
        inner = f.type.element if isinstance(f.type, ArrayOf) else f.type
        if isinstance(inner, Struct):
            found += _named_fields(inner, (*prefix, f.name))
        elif f.name in _BROKER_NAMES:
            found.append((*prefix, f.name))
    return found


def test_every_field_naming_a_broker_is_in_the_table() -> None:
    """A new schema field like leader_id or host must be routed (or exempted) before a proxy
    relays it unrewritten."""
    missing, listed = [], set()
    for spec in KAFKA_APIS:
        row = ROUTES[spec.key]
        listed |= {(spec.key, "request" if n.in_request else "response", n.path) for n in row.names_nodes}
        for kind, struct in (("request", spec.request), ("response", spec.response)):
            for path in _named_fields(struct):
                if (spec.key, kind, path) not in listed and (spec.key, kind, path) not in _NOT_BROKERS:
                    missing.append(f"{spec.name} {kind} {'.'.join(path)}")
    assert missing == []
    assert set(_NOT_BROKERS).isdisjoint(listed)


def test_the_facts_a_proxy_routes_by() -> None:
    """A few rows spelled out: the routes issue 40's gateway depends on."""
    assert route_of(0).route is Route.PARTITION_LEADER
    assert route_of(22).route is Route.TRANSACTION_COORDINATOR and route_of(22).otherwise is Route.ANY_BROKER
    assert route_of(28).route is Route.GROUP_COORDINATOR  # TxnOffsetCommit: the group's coordinator
    assert {route_of(k).route for k in (19, 20, 37, 30, 31, 43, 55)} == {Route.CONTROLLER}
    assert {route_of(k).route for k in (16, 66)} == {Route.EACH_BROKER}
    assert {route_of(k).route for k in (32, 33, 44, 34, 35)} == {Route.NAMED_BROKER}
    assert {route_of(k).route for k in (17, 18, 36)} == {Route.CONNECTION}
    metadata = {n.path for n in route_of(3).names_nodes}
    assert {("brokers", "host"), ("brokers", "port"), ("controller_id",),
            ("topics", "partitions", "leader_id")} <= metadata


# -- the table in the docs ------------------------------------------------------------------------

DOCS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "kafka-apis.md"
_TABLE_START = "<!-- the table below is generated: tests/protocol/test_routing.py::docs_table -->"
_TABLE_END = "<!-- end of the generated table -->"


def _path(path: FieldPath) -> str:
    return ".".join(path)


def _node_fields(row: ApiRoute) -> str:
    parts = []
    for n in row.names_nodes:
        text = f"`{_path(n.path)}`"
        if n.when is not None:
            text += f" ({n.when[0]} {'/'.join(str(v) for v in sorted(n.when[1]))})"
        if n.in_request:
            text += " (request)"
        if n.controllers:
            text += " (controllers)"
        parts.append(text)
    return ", ".join(parts)


def _routed_by(row: ApiRoute) -> str:
    parts = [f"`{_path(p)}`" for p in row.keys]
    parts += [f"`{_path(k.topic)}` / `{_path(k.partition)}`" for k in row.partitions]
    text = ", ".join(parts)
    if row.key_when is not None:
        text += f" when `{row.key_when[0][-1]}` is " + " or ".join(str(v) for v in sorted(row.key_when[1]))
    if row.otherwise is not None:
        text += f"; otherwise {row.otherwise.value}"
    return text


def docs_table() -> str:
    """The API table of docs/guide/kafka-apis.md, from KAFKA_APIS and ROUTES."""
    from tests.protocol.test_kafka_apis import KAFKA_4_0_1_BROKER

    lines = ["| Key | API | Declared | Kafka 4.0.1 | Flexible | Route | Routed by | Fields naming "
             "brokers | From Kafka's |",
             "|---|---|---|---|---|---|---|---|---|"]
    for spec in KAFKA_APIS:
        row = ROUTES[spec.key]
        low, high = KAFKA_4_0_1_BROKER[spec.key]
        served = f"{low}–{high}" if spec.key != 0 else "3–12 (0–2 advertised, refused)"
        flexible = "—" if spec.first_flexible is None else f"{spec.first_flexible}+"
        lines.append(f"| {spec.key} | {spec.name} | {spec.min_version}–{spec.max_version} | "
                     f"{served} | {flexible} | {row.route.value} | {_routed_by(row)} | "
                     f"{_node_fields(row)} | {row.source} |")
    return "\n".join(lines)


def test_the_docs_table_is_the_code_table() -> None:
    text = DOCS_PAGE.read_text(encoding="utf-8")
    table = text.split(_TABLE_START, 1)[1].split(_TABLE_END, 1)[0].strip()
    assert table == docs_table(), "regenerate the table: print(docs_table())"
