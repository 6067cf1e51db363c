"""Every API the cluster serves, relayed where Kafka routes it (:mod:`lazyconv.protocol._routing`).

For a request at a version the cluster serves (:func:`~lazyconv.gateway._apis.relays`), the
route of its API decides where it goes; the client's own bytes go there when one broker gets the
whole request (:mod:`~lazyconv.gateway._relayed`):

- **any broker, the controller**: a broker this client already has a connection to (a KRaft
  broker forwards controller requests itself, KIP-590). Admin requests that change topics make
  the gateway's metadata cache ask again.
- **group / transaction coordinator**: the coordinator of the request's group id or
  transactional id (:mod:`~lazyconv.gateway._coordinators`); a request without one
  (InitProducerId of an idempotent producer, an empty group id) goes to any broker, which
  answers it or refuses it as Kafka does. Requests naming several groups or transactional ids
  (DescribeGroups, DeleteGroups, ConsumerGroupDescribe, DescribeTransactions, OffsetFetch v8+)
  are split per coordinator and the answers merged in the request's order.
- **partition leader**: split per leader (ListOffsets, DeleteRecords, OffsetForLeaderEpoch,
  DescribeProducers), the answers merged in the request's order; a partition without a known
  leader is answered with the cluster's error for its topic or NOT_LEADER_OR_FOLLOWER, in the
  entry Kafka answers it with (its "not known" offsets and epochs; DescribeProducers' message
  for a topic refused as a whole); one a ListOffsets names twice as Kafka refuses it before it
  looks for a leader (:func:`~lazyconv.gateway._list_offsets_relay.named_twice_error`).
- **each broker**: asked of every broker, the lists merged (ListGroups, ListTransactions,
  DescribeLogDirs: the gateway stands for every broker).
- **named broker**: config resources of brokers (:mod:`~lazyconv.gateway._config_relay`).

Upstream failures are answered, never a closed connection: a coordinator that cannot be found
or reached with COORDINATOR_NOT_AVAILABLE (and forgotten), a leader with NOT_LEADER_OR_FOLLOWER
(the metadata forgotten), any broker with REQUEST_TIMED_OUT — all retriable. An upstream answer
the gateway must decode (to merge it, or to rewrite the brokers it names) and cannot is such a
failure too: the one request is answered so, the client's connection stays. They are logged
through the cluster's state (:class:`~lazyconv.gateway._cluster_state.ClusterState`): a broker
failing once until it answers again, any other failure once a minute with its repeats counted,
not once per client request.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from lazyconv.errors import ErrorCode, LazyconvError, UpstreamError
from lazyconv.gateway._config_relay import CONFIG_APIS, relay_configs
from lazyconv.gateway._coordinators import COORDINATOR_ERRORS, CoordinatorError, Coordinators
from lazyconv.gateway._error_map import RETRIABLE_ROUTING_ERRORS, UNREACHABLE, UPSTREAM_UNAVAILABLE
from lazyconv.gateway._list_offsets_relay import named_twice_error
from lazyconv.gateway._relayed import Relayed
from lazyconv.gateway._routing import route_to_leaders
from lazyconv.gateway._upstream import UpstreamCluster, UpstreamSession
from lazyconv.net._model import Listener, Response
from lazyconv.protocol import _describe_producers as describe_producers
from lazyconv.protocol import _list_offsets as list_offsets
from lazyconv.protocol._connection import Request
from lazyconv.protocol._routing import FieldPath, Route

log = logging.getLogger(__name__)

__all__ = ["ApiRelay"]

_COORDINATOR_NOT_AVAILABLE = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
_INVALID_TOPIC = int(ErrorCode.INVALID_TOPIC_EXCEPTION)

# Requests naming several coordinator keys: API key -> (the answer's list, its key field).
# The request's list is the route's key path.
_COORDINATOR_LISTS: dict[int, tuple[str, str]] = {
    9: ("groups", "group_id"),  # OffsetFetch v8+
    15: ("groups", "group_id"),  # DescribeGroups
    42: ("results", "group_id"),  # DeleteGroups
    65: ("transaction_states", "transactional_id"),  # DescribeTransactions
    69: ("groups", "group_id"),  # ConsumerGroupDescribe
}
# Partition-leader APIs: API key -> the answer's (topics, topic name, partitions, partition
# index) fields; the request's are the route's partition key.
_PARTITION_ANSWERS: dict[int, tuple[str, str, str, str]] = {
    2: ("topics", "name", "partitions", "partition_index"),  # ListOffsets
    21: ("topics", "name", "partitions", "partition_index"),  # DeleteRecords
    23: ("topics", "topic", "partitions", "partition"),  # OffsetForLeaderEpoch
    61: ("topics", "name", "partitions", "partition_index"),  # DescribeProducers
}
# Partition-leader APIs whose broker puts a message on the partitions of a topic it refuses as a
# whole: API key -> the message of (topic, code).
_TOPIC_ERROR_MESSAGES: dict[int, Callable[[str, int], str | None]] = {
    describe_producers.SPEC.key: describe_producers.topic_error_message,
}
# Asked of every broker: API key -> the answer's list that is merged.
_EACH_BROKER_LISTS: dict[int, str] = {
    16: "groups",  # ListGroups
    66: "transaction_states",  # ListTransactions
    35: "results",  # DescribeLogDirs: the gateway's log directories are all the brokers'
}
# Admin requests after which the gateway's metadata cache asks the cluster again.
_CHANGE_TOPICS = frozenset({19, 20, 37, 45})  # CreateTopics, DeleteTopics, CreatePartitions,
# AlterPartitionReassignments


class ApiRelay:
    """Relays requests the cluster serves to where Kafka routes them (module docstring)."""

    def __init__(self, cluster: UpstreamCluster, coordinators: Coordinators) -> None:
        self.cluster = cluster
        self.coordinators = coordinators

    async def relay(self, request: Request, session: UpstreamSession,
                    listener: Listener) -> Response:
        """The answer to ``request`` (raises :class:`~lazyconv.errors.RemoteProtocolError`
        for a body that does not decode: the connection ends, as with a broker)."""
        relayed = Relayed(request, request.decode(), session, listener)
        key = request.api_key
        route = relayed.route
        if key in CONFIG_APIS:
            return await relay_configs(relayed)
        if key in _EACH_BROKER_LISTS:
            return await self._each_broker(relayed, _EACH_BROKER_LISTS[key])
        if route.route in (Route.GROUP_COORDINATOR, Route.TRANSACTION_COORDINATOR):
            return await self._coordinated(relayed)
        if route.route is Route.PARTITION_LEADER:
            return await self._leaders(relayed)
        return await self._any(relayed)

    # -- any broker, the controller ----------------------------------------------------------

    async def _any(self, relayed: Relayed) -> Response:
        try:
            conn = await relayed.session.any_connection()
            frame = await relayed.send(conn)
        except UpstreamError as exc:
            self.cluster.state.warn(f"{relayed.spec.name} upstream", exc)
            return relayed.refuse(UPSTREAM_UNAVAILABLE)
        if relayed.request.api_key in _CHANGE_TOPICS:
            relayed.cluster.invalidate()
        try:
            return relayed.answer(frame)
        except LazyconvError as exc:
            # an answer naming brokers is decoded to be rewritten: one that does not decode is
            # the upstream's fault, not the client's, whose connection stays (REQUEST_TIMED_OUT
            # is retriable at every version)
            self.cluster.state.warn(f"{relayed.spec.name} upstream",
                                    f"an answer that does not decode: {exc}")
            return relayed.refuse(UPSTREAM_UNAVAILABLE)

    # -- coordinators ----------------------------------------------------------------------------

    async def _coordinated(self, relayed: Relayed) -> Response:
        route = relayed.route
        key_type = route.coordinator_key_type
        assert key_type is not None
        path = _present_path(relayed, route.keys)
        if path is None:  # this version names no key (none of the route's fields)
            return await self._any(relayed)
        found = _values(relayed.body, path)
        if len(path) == 1 and not isinstance(relayed.body.get(path[0]), list):
            key = found[0] if found else None
            if not key:  # an idempotent producer's InitProducerId, an empty group id
                return await self._any(relayed)
            return await self._to_coordinator(relayed, key_type, key)
        listing = _COORDINATOR_LISTS.get(relayed.request.api_key)
        if listing is None or not found:
            return await self._any(relayed)
        return await self._split_by_coordinator(relayed, key_type, path, listing)

    async def _to_coordinator(self, relayed: Relayed, key_type: int, key: str) -> Response:
        try:
            node = await self.coordinators.find(relayed.session, key_type, key)
            frame = await relayed.send(await relayed.session.connection(node))
        except CoordinatorError as exc:
            return relayed.refuse(exc.code)
        except UpstreamError as exc:
            self.cluster.state.warn(f"{relayed.spec.name} at a coordinator", exc)
            self.coordinators.forget(relayed.session, key_type, key)
            return relayed.refuse(_COORDINATOR_NOT_AVAILABLE)
        try:
            decoded = relayed.decode(frame)
        except LazyconvError as exc:
            # the upstream's fault, met again by every request of every client: said once, then
            # at most once a minute with the repeats counted; the client looks for the
            # coordinator again (COORDINATOR_NOT_AVAILABLE), and so does the gateway
            self.cluster.state.warn(f"{relayed.spec.name} at a coordinator",
                                    f"an answer for {key!r} that does not decode: {exc}")
            self.coordinators.forget(relayed.session, key_type, key)
            return relayed.refuse(_COORDINATOR_NOT_AVAILABLE)
        if _codes(decoded) & COORDINATOR_ERRORS:
            self.coordinators.forget(relayed.session, key_type, key)
        return relayed.answer(frame, decoded)

    async def _split_by_coordinator(self, relayed: Relayed, key_type: int, path: FieldPath,
                                    listing: tuple[str, str]) -> Response:
        answer_list, answer_key = listing
        items: list[Any] = relayed.body[path[0]]

        def key_of(item: Any) -> str:
            return str(item[path[1]] if len(path) > 1 else item)

        by_node: dict[int, list[Any]] = {}
        failed: dict[int, list[Any]] = {}
        keys = list(dict.fromkeys(key_of(item) for item in items))

        async def find(key: str) -> tuple[str, int, int]:
            try:
                return key, await self.coordinators.find(relayed.session, key_type, key), 0
            except CoordinatorError as exc:
                return key, -1, exc.code
            except UpstreamError:
                return key, -1, _COORDINATOR_NOT_AVAILABLE

        nodes = {key: (node, code) for key, node, code in await asyncio.gather(*map(find, keys))}
        for item in items:
            node, code = nodes[key_of(item)]
            (failed.setdefault(code, []) if code else by_node.setdefault(node, [])).append(item)
        if len(by_node) == 1 and not failed:
            return await self._to_coordinator(relayed, key_type, keys[0]) if len(keys) == 1 \
                else await self._one_coordinator(relayed, next(iter(by_node)), key_type, keys)
        answers: dict[str, dict[str, Any]] = {}
        first: dict[str, Any] | None = None
        throttles: list[int] = []

        async def ask(node: int, part: list[Any]) -> None:
            nonlocal first
            sub = {**relayed.body, path[0]: part}
            try:
                answer = relayed.decode(await relayed.send(await relayed.session.connection(node),
                                                           sub))
            except (UpstreamError, LazyconvError) as exc:
                self.cluster.state.warn(f"{relayed.spec.name} at a coordinator", exc)
                answer = relayed.refusal(_COORDINATOR_NOT_AVAILABLE, sub)
            first = first or answer
            throttles.append(answer.get("throttle_time_ms", 0))
            for entry in answer.get(answer_list) or []:
                answers[str(entry.get(answer_key))] = entry
                if entry.get("error_code") in COORDINATOR_ERRORS:
                    self.coordinators.forget(relayed.session, key_type, str(entry.get(answer_key)))

        await asyncio.gather(*(ask(node, part) for node, part in by_node.items()))
        for code, part in failed.items():
            for entry in relayed.refusal(code, {**relayed.body, path[0]: part}).get(answer_list) or []:
                answers[str(entry.get(answer_key))] = entry
        merged = dict(first) if first is not None else relayed.refusal(0, {**relayed.body, path[0]: []})
        merged[answer_list] = [answers[key_of(item)] for item in items if key_of(item) in answers]
        _longest_throttle(merged, throttles)
        return relayed.reply(merged)

    async def _one_coordinator(self, relayed: Relayed, node: int, key_type: int,
                               keys: list[str]) -> Response:
        """Every key's coordinator is one broker: the request goes there as it came."""
        try:
            frame = await relayed.send(await relayed.session.connection(node))
            decoded = relayed.decode(frame)
        except (UpstreamError, LazyconvError) as exc:
            self.cluster.state.warn(f"{relayed.spec.name} at a coordinator", exc)
            for key in keys:
                self.coordinators.forget(relayed.session, key_type, key)
            return relayed.refuse(_COORDINATOR_NOT_AVAILABLE)
        if _codes(decoded) & COORDINATOR_ERRORS:
            for key in keys:
                self.coordinators.forget(relayed.session, key_type, key)
        return relayed.answer(frame, decoded)

    # -- partition leaders -----------------------------------------------------------------------

    async def _leaders(self, relayed: Relayed) -> Response:
        route = relayed.route
        answer_fields = _PARTITION_ANSWERS.get(relayed.request.api_key)
        if answer_fields is None or not route.partitions:
            return await self._any(relayed)
        topics_field, name_field = route.partitions[0].topic
        partition_path = route.partitions[0].partition
        parts_field = partition_path[1]
        index_field = partition_path[2] if len(partition_path) > 2 else None
        wanted: list[tuple[str, int]] = []
        for topic in relayed.body.get(topics_field) or []:
            for part in topic.get(parts_field) or []:
                wanted.append((topic[name_field], part[index_field] if index_field else part))
        if wanted:
            try:
                await relayed.cluster.topics_for(list(dict.fromkeys(t for t, _ in wanted)))
            except UpstreamError as exc:
                log.debug("%s: no metadata from the cluster: %s", relayed.spec.name, exc)
        failed: dict[tuple[str, int], int] = {}
        routed = wanted
        if relayed.request.api_key == describe_producers.SPEC.key:
            # Kafka refuses an invalid name before anything else, authorization included
            failed = {tp: _INVALID_TOPIC for tp in wanted
                      if describe_producers.invalid_topic_reason(tp[0]) is not None}
            routed = [tp for tp in wanted if tp not in failed]
        by_leader = route_to_leaders(relayed.cluster, routed, lambda tp: tp,
                                     lambda tp, code: failed.__setitem__(tp, code))
        if relayed.request.api_key == list_offsets.SPEC.key and len(set(wanted)) < len(wanted):
            # a partition named twice is refused before its leader is looked for: one the
            # gateway cannot route is refused as its leader would refuse it
            named = Counter(wanted)
            for tp in failed:
                code = named_twice_error(relayed.cluster, tp[0]) if named[tp] > 1 else None
                if code is not None:
                    failed[tp] = code

        def subset(keep: Callable[[str, int], bool]) -> dict[str, Any]:
            topics = []
            for topic in relayed.body.get(topics_field) or []:
                parts = [p for p in topic.get(parts_field) or []
                         if keep(topic[name_field], p[index_field] if index_field else p)]
                if parts:
                    topics.append({**topic, parts_field: parts})
            return {**relayed.body, topics_field: topics}

        if not wanted or (len(by_leader) == 1 and not failed):
            return await self._one_leader(relayed, next(iter(by_leader), None), answer_fields)
        answers: dict[tuple[str, int], dict[str, Any]] = {}
        topic_entries: dict[str, dict[str, Any]] = {}
        first: dict[str, Any] | None = None
        throttles: list[int] = []

        def collect(answer: dict[str, Any]) -> None:
            a_topics, a_name, a_parts, a_index = answer_fields
            for topic in answer.get(a_topics) or []:
                topic_entries.setdefault(topic[a_name], topic)
                for part in topic.get(a_parts) or []:
                    answers[(topic[a_name], part[a_index])] = part
                    if part.get("error_code") in RETRIABLE_ROUTING_ERRORS:
                        relayed.cluster.invalidate(topic[a_name])

        async def ask(node: int, items: list[tuple[str, int]]) -> None:
            nonlocal first
            mine = set(items)
            sub = subset(lambda t, p: (t, p) in mine)
            try:
                answer = relayed.decode(await relayed.send(await relayed.session.connection(node),
                                                           sub))
            except (UpstreamError, LazyconvError) as exc:
                self.cluster.state.broker_failed(node, relayed.spec.name, exc)
                relayed.cluster.invalidate()
                answer = relayed.refusal(UNREACHABLE, sub)
            first = first or answer
            throttles.append(answer.get("throttle_time_ms", 0))
            collect(answer)

        await asyncio.gather(*(ask(node, items) for node, items in by_leader.items()))
        topic_message = _TOPIC_ERROR_MESSAGES.get(relayed.request.api_key)
        refused: dict[tuple[int, str | None], set[tuple[str, int]]] = {}
        for (name, index), code in failed.items():
            info = relayed.cluster.topics.get(name)
            whole_topic = code == _INVALID_TOPIC or info is not None and info.error_code == code
            message = topic_message(name, code) if topic_message is not None and whole_topic \
                else None
            refused.setdefault((code, message), set()).add((name, index))
        for (code, message), items in refused.items():
            collect(relayed.refusal(code, subset(_one_of(items)), message))
        a_topics, a_name, a_parts, a_index = answer_fields
        merged = dict(first) if first is not None else relayed.refusal(0, subset(lambda t, p: False))
        out = []
        for topic in relayed.body.get(topics_field) or []:
            name = topic[name_field]
            parts = [answers[(name, p[index_field] if index_field else p)]
                     for p in topic.get(parts_field) or []
                     if (name, p[index_field] if index_field else p) in answers]
            out.append({**topic_entries.get(name, {a_name: name}), a_parts: parts})
        merged[a_topics] = out
        _longest_throttle(merged, throttles)
        return relayed.reply(merged)

    async def _one_leader(self, relayed: Relayed, node: int | None,
                          answer_fields: tuple[str, str, str, str]) -> Response:
        """Every partition has one leader (or the request names none): sent as it came."""
        try:
            conn = await (relayed.session.connection(node) if node is not None
                          else relayed.session.any_connection())
            frame = await relayed.send(conn)
            answer = relayed.decode(frame)
        except (UpstreamError, LazyconvError) as exc:
            if node is None:
                self.cluster.state.warn(f"{relayed.spec.name} upstream", exc)
            else:
                self.cluster.state.broker_failed(node, relayed.spec.name, exc)
            relayed.cluster.invalidate()
            return relayed.refuse(UNREACHABLE)
        a_topics, a_name, a_parts, _index = answer_fields
        for topic in answer.get(a_topics) or []:
            if any(p.get("error_code") in RETRIABLE_ROUTING_ERRORS for p in topic.get(a_parts) or []):
                relayed.cluster.invalidate(topic[a_name])
        return relayed.answer(frame, answer)

    # -- every broker ------------------------------------------------------------------------

    async def _each_broker(self, relayed: Relayed, listed: str) -> Response:
        try:
            if not relayed.cluster.brokers:
                await relayed.cluster.refresh([])
        except UpstreamError as exc:
            log.debug("%s: no metadata from the cluster: %s", relayed.spec.name, exc)
        nodes = sorted(relayed.cluster.brokers)
        unreachable = (_COORDINATOR_NOT_AVAILABLE if relayed.request.api_key != 35
                       else UPSTREAM_UNAVAILABLE)

        async def ask(node: int) -> dict[str, Any]:
            try:
                return relayed.decode(await relayed.send(await relayed.session.connection(node)))
            except (UpstreamError, LazyconvError) as exc:
                self.cluster.state.broker_failed(node, relayed.spec.name, exc)
                return relayed.refusal(unreachable, {})

        answers: list[dict[str, Any]] = await asyncio.gather(*map(ask, nodes)) if nodes else \
            [relayed.refusal(unreachable, {})]
        merged = dict(answers[0])
        merged[listed] = [entry for answer in answers for entry in answer.get(listed) or []]
        codes = [a.get("error_code", 0) for a in answers if a.get("error_code")]
        if codes:
            merged["error_code"] = codes[0]
        _longest_throttle(merged, [a.get("throttle_time_ms", 0) for a in answers])
        return relayed.reply(merged)


def _longest_throttle(merged: dict[str, Any], throttles: list[int]) -> None:
    """A merged answer asks the client to back off as long as the longest of the upstream
    answers it is made of (a broker's quota throttle), where its version has the field."""
    if "throttle_time_ms" in merged:
        merged["throttle_time_ms"] = max([merged["throttle_time_ms"], *throttles])


def _one_of(items: set[tuple[str, int]]) -> Callable[[str, int], bool]:
    return lambda topic, partition: (topic, partition) in items


def _present_path(relayed: Relayed, paths: tuple[FieldPath, ...]) -> FieldPath | None:
    """The first of ``paths`` whose first field the request's version has."""
    fields = {f.name: f for f in relayed.spec.request.fields}
    for path in paths:
        f = fields.get(path[0])
        if f is not None and f.present_in(relayed.version):
            return path
    return None


def _values(value: Any, path: FieldPath) -> list[Any]:
    """The values at ``path`` (arrays on the way walked through)."""
    if isinstance(value, list):
        return [v for item in value for v in _values(item, path)]
    if not path:
        return [value]
    if not isinstance(value, dict):
        return []
    return _values(value.get(path[0]), path[1:])


_CODE_FIELDS = frozenset({"error_code", "partition_error_code"})


def _codes(value: Any) -> set[int]:
    """Every error code in a decoded answer (``error_code`` fields, and AddPartitionsToTxn
    v0-3's ``partition_error_code``)."""
    found: set[int] = set()
    if isinstance(value, dict):
        for name, item in value.items():
            if name in _CODE_FIELDS and isinstance(item, int):
                found.add(item)
            elif isinstance(item, (dict, list)):
                found |= _codes(item)
    elif isinstance(value, list):
        for item in value:
            found |= _codes(item)
    return found

