"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs through the gateway: config
resources of brokers mapped onto the real brokers.

A BROKER or BROKER_LOGGER resource names a broker by its id, and only that broker answers for it
(Kafka 4 refuses another broker's id with INVALID_REQUEST). A client of the gateway knows one
broker, the gateway (Metadata), so the gateway's id stands for the brokers behind it:

- **described**: the first reachable broker (the lowest node id) answers, under the gateway's
  id — its values are that broker's (``listeners``, ``node.id`` ... are not rewritten);
- **altered**: every broker gets the change under its own id; the answer is the first broker's
  error, or success when all succeeded;
- a resource naming a real broker's id is sent to that broker as it is (operators who know the
  ids behind the gateway can still address one); an unknown id to any broker, which refuses it;
- the cluster default (an empty name) and every other resource type go to any broker (Kafka
  forwards alterations to the controller).

A request whose resources need none of this goes as it came to any broker.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lazyconv.errors import LazyconvError, UpstreamError
from lazyconv.gateway._error_map import UPSTREAM_UNAVAILABLE
from lazyconv.gateway._relayed import Relayed
from lazyconv.gateway._upstream import UpstreamConnection
from lazyconv.net._model import Response
from lazyconv.protocol._routing import BROKER_RESOURCE_TYPES

__all__ = ["CONFIG_APIS", "relay_configs"]

#: API key -> the answer's list of resources
CONFIG_APIS: dict[int, str] = {32: "results", 33: "responses", 44: "responses"}
_DESCRIBE = 32
_ANY = -1  # a destination: any broker


async def relay_configs(relayed: Relayed) -> Response:
    """The answer to a config request (see the module docstring)."""
    answer_list = CONFIG_APIS[relayed.request.api_key]
    resources: list[dict[str, Any]] = relayed.body.get("resources") or []
    me = str(relayed.listener.node_id)
    brokers = relayed.cluster.brokers
    # per resource: [(destination node, the resource as sent there)]
    plan: list[list[tuple[int, dict[str, Any]]]] = []
    for resource in resources:
        name = resource.get("resource_name") or ""
        if resource.get("resource_type") not in BROKER_RESOURCE_TYPES or not name:
            plan.append([(_ANY, resource)])
        elif name == me:
            nodes = sorted(brokers)
            if relayed.request.api_key == _DESCRIBE:
                nodes = nodes[:1]
            plan.append([(node, {**resource, "resource_name": str(node)}) for node in nodes]
                        or [(_ANY, resource)])
        elif name.isascii() and name.isdigit() and int(name) in brokers:  # not "²": int() refuses it
            plan.append([(int(name), resource)])
        else:
            plan.append([(_ANY, resource)])
    if all(dest == _ANY for sends in plan for dest, _ in sends):
        try:
            frame = await relayed.send(await relayed.session.any_connection())
        except UpstreamError as exc:
            relayed.cluster.state.warn(f"{relayed.spec.name} upstream", exc)
            return relayed.refuse(UPSTREAM_UNAVAILABLE)
        return relayed.answer(frame)

    by_node: dict[int, list[dict[str, Any]]] = {}
    for sends in plan:
        for node, sent in sends:
            by_node.setdefault(node, []).append(sent)
    answers: dict[tuple[int, Any, str], dict[str, Any]] = {}
    first: dict[str, Any] | None = None

    async def ask(node: int, part: list[dict[str, Any]]) -> None:
        nonlocal first
        sub = {**relayed.body, "resources": part}
        try:
            conn: UpstreamConnection = await (relayed.session.any_connection() if node == _ANY
                                              else relayed.session.connection(node))
            answer = relayed.decode(await relayed.send(conn, sub))
        except (UpstreamError, LazyconvError) as exc:
            if node == _ANY:
                relayed.cluster.state.warn(f"{relayed.spec.name} upstream", exc)
            else:
                relayed.cluster.state.broker_failed(node, relayed.spec.name, exc)
            answer = relayed.refusal(UPSTREAM_UNAVAILABLE, sub)
        first = first or answer
        for entry in answer.get(answer_list) or []:
            answers[(node, entry.get("resource_type"), entry.get("resource_name") or "")] = entry

    await asyncio.gather(*(ask(node, part) for node, part in by_node.items()))
    merged = dict(first) if first is not None else relayed.refusal(0, {"resources": []})
    out = []
    for resource, sends in zip(resources, plan, strict=True):
        got = [answers.get((node, sent.get("resource_type"), sent.get("resource_name") or ""))
               for node, sent in sends]
        found = [g for g in got if g is not None]
        if not found:
            continue
        entry = next((g for g in found if g.get("error_code")), found[0])
        out.append({**entry, "resource_name": resource.get("resource_name")})
    merged[answer_list] = out
    return relayed.reply(merged)
