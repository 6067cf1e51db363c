"""The gateway's ApiVersions table (gateway._apis), its broker rewriting (gateway._rewrite) and the
client id it sends upstream: pure functions, no cluster."""

from __future__ import annotations

from lazyconv.gateway._apis import CONVERTED, NOT_ROUTED, OWN, RELAY_MAX, gateway_api_table, relays
from lazyconv.gateway._floor import upstream_floor
from lazyconv.gateway._handler import upstream_client_id
from lazyconv.gateway._rewrite import names_brokers, rewrite_brokers
from lazyconv.net._model import Listener
from lazyconv.protocol import KAFKA_API_BY_KEY, KAFKA_APIS
from lazyconv.protocol._routing import ROUTES, Route
from tests.conftest import REPO_ROOT
from tests.protocol.test_kafka_apis import KAFKA_4_0_1_BROKER

ME = Listener(7, "gateway.example", 19092)


def test_against_kafka_4_0_1_every_api_but_the_unrouted_is_advertised() -> None:
    features = {"finalized_features_epoch": 5, "finalized_features": [
        {"name": "transaction.version", "min_version_level": 2, "max_version_level": 2}]}
    table = gateway_api_table(KAFKA_4_0_1_BROKER, features)
    assert set(table.advertised) == set(KAFKA_4_0_1_BROKER) - set(NOT_ROUTED)
    for spec in KAFKA_APIS:  # every declared version parses (answered, if only with an error)
        assert table.version_range(spec.key) == (spec.min_version, spec.max_version)
    for key, (low, high) in table.advertised.items():
        spec = KAFKA_API_BY_KEY[key]
        served_low, served_high = KAFKA_4_0_1_BROKER[key]
        if key in OWN:
            assert (low, high) == (spec.min_version, spec.max_version), spec.name
        elif key in CONVERTED:  # old versions converted, the rest as the cluster serves them
            assert (low, high) == (0, max(CONVERTED[key], served_high)), spec.name
        else:
            assert low == max(served_low, upstream_floor(key)), spec.name
            assert high == min(served_high, RELAY_MAX.get(key, served_high)), spec.name
    assert table.advertised[24] == (0, 3)  # AddPartitionsToTxn v4+ is the brokers' own
    assert table.advertised[0] == (0, 12)  # Produce v12 (transaction protocol 2) relayed
    answer = table.api_versions_response()
    assert answer["finalized_features"] == features["finalized_features"]
    assert answer["finalized_features_epoch"] == 5


def test_before_the_cluster_answers_only_what_the_gateway_converts() -> None:
    table = gateway_api_table({})
    assert set(table.advertised) == set(OWN) | set(CONVERTED)
    assert table.advertised[0] == (0, 11)
    assert table.advertised[9] == (0, 7)  # OffsetFetch: one group per request
    assert not table.advertises(19, 7)  # CreateTopics: parsed, not advertised
    assert table.version_range(19) == (2, 7)


def test_a_version_below_kafka_4s_floor_is_never_relayed() -> None:
    kafka_3_9 = {11: (0, 9), 8: (0, 9), 14: (0, 5), 2: (0, 9), 19: (0, 7)}
    assert not relays(11, 1, kafka_3_9) and relays(11, 2, kafka_3_9)  # JoinGroup: converted
    assert not relays(8, 1, kafka_3_9) and relays(8, 2, kafka_3_9)  # OffsetCommit
    assert relays(14, 0, kafka_3_9)  # SyncGroup v0 is still Kafka 4's
    assert not relays(2, 0, kafka_3_9)  # ListOffsets v0: converted
    assert not relays(3, 12, {3: (0, 13)})  # Metadata is the gateway's own
    assert not relays(19, 8, kafka_3_9)  # a version the cluster does not serve
    assert not relays(17, 1, {17: (0, 1)})  # SASL: not routed


def test_each_clients_own_id_goes_upstream() -> None:
    assert upstream_client_id("", "billing") == "billing"
    assert upstream_client_id("gw-", "billing") == "gw-billing"
    assert upstream_client_id("", None) is None
    assert upstream_client_id("gw-", None) == "gw-"
    # prefix and id together longer than a client id: cut to 32767 bytes, on a character
    long_id = upstream_client_id("é" * 16000, "c" * 800)
    assert long_id == "é" * 16000 + "c" * 767 and len(long_id.encode()) == 32767
    assert upstream_client_id("é" * 16383, "x") == "é" * 16383 + "x"  # 32767 bytes: kept
    assert upstream_client_id("gw-", "é" * 16383) == "gw-" + "é" * 16382


def test_answers_name_the_gateway_as_the_only_broker() -> None:
    cluster = {"throttle_time_ms": 0, "error_code": 0, "cluster_id": "c", "controller_id": 2,
               "brokers": [{"broker_id": b, "host": f"kafka-{b}", "port": 9092, "rack": "r"}
                           for b in (1, 2, 3)]}
    rewrite_brokers(ROUTES[60], cluster, ME)
    assert cluster["brokers"] == [{"broker_id": 7, "host": "gateway.example", "port": 19092,
                                   "rack": None}]
    assert cluster["controller_id"] == 7
    topics = {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "leader_id": 3, "replica_nodes": [1, 2, 3], "isr_nodes": [3],
         "eligible_leader_replicas": [], "last_known_elr": [1], "offline_replicas": []},
        {"partition_index": 1, "leader_id": -1, "replica_nodes": [2], "isr_nodes": [],
         "eligible_leader_replicas": [], "last_known_elr": [], "offline_replicas": [2]}]}]}
    rewrite_brokers(ROUTES[75], topics, ME)
    assert [(p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"],
             p["last_known_elr"], p["offline_replicas"]) for p in topics["topics"][0]["partitions"]] \
        == [(0, 7, [7], [7], [7], []), (1, -1, [7], [], [], [7])]


def test_every_api_whose_answers_name_brokers_is_rewritten() -> None:
    rewritten = {key for key, route in ROUTES.items() if names_brokers(route)}
    # Produce, Fetch, Metadata and FindCoordinator answers are the gateway's own; DescribeQuorum
    # names KRaft controllers, left as they are
    assert rewritten == {0, 1, 3, 10, 46, 60, 75}
    assert not names_brokers(ROUTES[55])


# -- the table of docs/guide/gateway.md ----------------------------------------------------------

DOCS_PAGE = REPO_ROOT / "docs" / "guide" / "gateway.md"
_TABLE_START = "<!-- the table below is generated: tests/gateway/test_api_table.py::docs_table -->"
_TABLE_END = "<!-- end of the generated table -->"


def _where(key: int) -> str:
    """Where the gateway sends a relayed request of ``key`` (from the relays' own tables)."""
    from lazyconv.gateway._api_relay import (
        _COORDINATOR_LISTS,
        _EACH_BROKER_LISTS,
        _PARTITION_ANSWERS,
    )
    from lazyconv.gateway._config_relay import CONFIG_APIS

    route = ROUTES[key]
    if key in CONFIG_APIS:
        text = ("BROKER and BROKER_LOGGER resources named by the gateway's id: " +
                ("the first broker, under the gateway's id" if key == 32 else "every broker") +
                f"; the rest: {(route.otherwise or route.route).value}")
    elif key in _EACH_BROKER_LISTS:
        text = f"every broker, the `{_EACH_BROKER_LISTS[key]}` lists merged"
    elif route.route is Route.PARTITION_LEADER and key in _PARTITION_ANSWERS:
        text = "each partition's leader, split and merged in the request's order"
    elif route.coordinator_key_type is not None:
        keys = ", ".join(f"`{'.'.join(path)}`" for path in route.keys)
        text = f"the {route.route.value} of {keys}"
        if key in _COORDINATOR_LISTS:
            text += ", split per coordinator and merged in the request's order"
        if route.otherwise is not None:
            text += f"; without one, {route.otherwise.value}"
    elif route.route is Route.CONTROLLER:
        text = "the controller, through any broker (KRaft brokers forward it)"
    else:
        text = route.route.value
    if names_brokers(route):
        text += "; the brokers its answer names rewritten to the gateway"
    elif any(f.controllers for f in route.names_nodes):
        text += "; the KRaft voters it names left as they are"
    return text


def docs_table() -> str:
    """The table of docs/guide/gateway.md: what the gateway does with each API in front of a
    Kafka 4.0.1 cluster."""
    table = gateway_api_table(KAFKA_4_0_1_BROKER)
    lines = ["| Key | API | Advertised (Kafka 4.0.1 behind) | What the gateway does | Where it goes |",
             "|---|---|---|---|---|"]
    for spec in KAFKA_APIS:
        key = spec.key
        advertised = table.advertised.get(key)
        versions = f"{advertised[0]}–{advertised[1]}" if advertised else "—"
        if key in NOT_ROUTED:
            what, where = "UNSUPPORTED_VERSION (35)", f"not routed: {NOT_ROUTED[key]}"
        elif key in OWN:
            what, where = "answers it itself", OWN[key]
        else:
            what = "relays it as it came"
            floor = upstream_floor(key)
            if key in CONVERTED and floor:
                old = f"v{spec.min_version}" + (f"–{floor - 1}" if floor - 1 > spec.min_version else "")
                what = f"converts {old} (below Kafka 4's floor); relays the rest as they came"
            if key in RELAY_MAX:
                what += f" (v{RELAY_MAX[key] + 1}+ is the brokers' own)"
            where = _where(key)
        lines.append(f"| {key} | {spec.name} | {versions} | {what} | {where} |")
    return "\n".join(lines)


def test_the_docs_table_is_the_code_table() -> None:
    text = DOCS_PAGE.read_text(encoding="utf-8")
    assert _TABLE_START in text and _TABLE_END in text
    table = text.split(_TABLE_START, 1)[1].split(_TABLE_END, 1)[0].strip()
    assert table == docs_table(), "regenerate the table: print(docs_table())"
