"""Answers that name brokers, rewritten so that the gateway is the cluster's only broker.

The gateway's Metadata lists one broker — the gateway's listener — as the leader, replica and
in-sync replica of every partition and as the controller. A relayed answer that names brokers
(:class:`~lazyconv.protocol._routing.NodeField`, e.g. DescribeCluster's brokers and controller,
DescribeTopicPartitions' leaders and replica lists, ListPartitionReassignments' replicas) must
say the same, or a client would open connections to brokers it was never meant to reach. So:

- a node id ``>= 0`` becomes the gateway's (``-1``, "none", stays);
- a non-empty list of node ids becomes ``[gateway]`` (an empty one stays empty);
- a host and port become the listener's, a rack ``null``;
- a list of broker endpoints (node id and host in each element) keeps one element.

Fields that name KRaft controllers (DescribeQuorum, the voter APIs) are not rewritten: they
describe the quorum, not brokers a client connects to. A broker id written as a config
resource's name is the config relay's (:mod:`lazyconv.gateway._config_relay`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lazyconv.net._model import Listener
from lazyconv.protocol._routing import ApiRoute, FieldPath, NodeField, NodeRole

__all__ = ["names_brokers", "rewrite_brokers"]

_REWRITTEN = frozenset({NodeRole.NODE_ID, NodeRole.NODE_IDS, NodeRole.HOST, NodeRole.PORT,
                        NodeRole.RACK})


def _answer_fields(route: ApiRoute) -> list[NodeField]:
    return [f for f in route.names_nodes
            if not f.in_request and not f.controllers and f.role in _REWRITTEN]


def names_brokers(route: ApiRoute) -> bool:
    """Whether answers of this API name brokers that must be rewritten."""
    return bool(_answer_fields(route))


def rewrite_brokers(route: ApiRoute, body: dict[str, Any], me: Listener) -> dict[str, Any]:
    """``body`` (a decoded answer of ``route``'s API) with every broker it names replaced by
    ``me``, in place; returned for convenience."""
    fields = _answer_fields(route)
    for f in fields:
        for parent in _parents(body, f.path):
            name = f.path[-1]
            if name not in parent:
                continue
            parent[name] = _replace(f.role, parent[name], me)
    endpoints = {f.path[:-1] for f in fields if f.role is NodeRole.HOST and len(f.path) > 1}
    for prefix in endpoints:
        node_field = next((f.path[-1] for f in fields
                           if f.role is NodeRole.NODE_ID and f.path[:-1] == prefix), None)
        if node_field is None:
            continue
        for parent in _parents(body, prefix):
            name = prefix[-1]
            items = parent.get(name)
            if isinstance(items, list) and len(items) > 1:
                parent[name] = _unique(items, node_field)
    return body


def _replace(role: NodeRole, value: Any, me: Listener) -> Any:
    if role is NodeRole.NODE_ID:
        return me.node_id if isinstance(value, int) and value >= 0 else value
    if role is NodeRole.NODE_IDS:
        return [me.node_id] if value else value
    if role is NodeRole.HOST:
        return me.host
    if role is NodeRole.PORT:
        return me.port
    return None  # a rack: the gateway has none


def _unique(items: list[Any], node_field: str) -> list[Any]:
    seen: set[Any] = set()
    out = []
    for item in items:
        key = item.get(node_field) if isinstance(item, dict) else id(item)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _parents(value: Any, path: FieldPath) -> Iterator[dict[str, Any]]:
    """Every dict holding the last field of ``path`` (arrays on the way walked through)."""
    if isinstance(value, list):
        for item in value:
            yield from _parents(item, path)
        return
    if not isinstance(value, dict):
        return
    if len(path) == 1:
        yield value
        return
    yield from _parents(value.get(path[0]), path[1:])
