"""Consumer groups through the gateway: the group APIs at versions the cluster does not serve
(below Kafka 4's floor: JoinGroup v0–1 — 4.0.0's; 4.0.1 serves them again —, OffsetCommit v0–1,
OffsetFetch v0) translated into
versions it accepts, and FindCoordinator answered with the gateway (docs/guide/gateway.md).
Versions the cluster serves are relayed as they came (:mod:`lazyconv.gateway._api_relay`).

The gateway is every client's coordinator: FindCoordinator answers with the gateway itself, for
groups and transactional ids alike, and each request goes to the real coordinator
(:mod:`lazyconv.gateway._coordinators`: found upstream with FindCoordinator, cached, forgotten on
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS, which reach the
client as the retriable errors they are). The group lives in Kafka, so members
that come through the gateway and members that talk to Kafka directly form one group, several
gateways serve the same group, and a client may move between gateways.

Translations, where the versions differ in more than the fields the schema engine fills in (the
SyncGroup, LeaveGroup, DescribeGroups and ListGroups ones apply only in front of a cluster that
lacks the client's version: Kafka 4 serves them all):

- **JoinGroup v0** has no rebalance timeout: the gateway sends the session timeout, which is
  what Kafka itself used for v0 members. From v4 a broker answers a member without an id with
  MEMBER_ID_REQUIRED (KIP-394) and the id to use; a client below v4 does not know that error,
  so the gateway joins again at once with that id and answers with the second result.
- **SyncGroup v5+** must repeat the protocol type and name the JoinGroup answered (a Kafka 4
  coordinator refuses it with INCONSISTENT_GROUP_PROTOCOL otherwise); older clients do not send
  them, so the gateway fills in what it saw in that member's last JoinGroup.
- **LeaveGroup v0–2** name one member; v3+ a list: the gateway sends a list of one.
- **OffsetCommit v0/v1** were ZooKeeper-era (v0) or timestamped (v1) commits without a group
  generation: they are sent as v2+ commits with generation −1 and no member, which Kafka stores
  in ``__consumer_offsets`` as "simple" commits for a group without active members (what an
  assign()-only client has) and refuses with ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID for a group
  with members, as a 2.x broker did. The retention is the broker's (``offsets.retention.minutes``)
  — v1's per-partition commit timestamp and v2–4's retention time are not honoured by Kafka 4.
  Metadata strings are kept.
- **OffsetFetch v0** read ZooKeeper: it is answered from Kafka's committed offsets, like v1.
  This relay answers up to v7 (one group per request); v8+ batches groups, which the API relay
  splits per coordinator.
- **ListGroups** asks every broker and merges; **DescribeGroups** asks each group's coordinator.

The answers the relay makes itself (FindCoordinator, the merged DescribeGroups and ListGroups,
an error after a coordinator lookup) carry the longest throttle time of the cluster's answers
they are made of, the lookup's included, as every answer the gateway builds: a client over its
quota backs off, an old client's answer is held (:mod:`~lazyconv.gateway._throttle`). One made
without asking the cluster (a coordinator already known) says 0: the gateway has no quota of
its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any

from lazyconv.errors import ErrorCode, UpstreamError
from lazyconv.gateway._coordinators import COORDINATOR_ERRORS, CoordinatorError, Coordinators
from lazyconv.gateway._upstream import UpstreamCluster, UpstreamSession
from lazyconv.protocol import (
    _describe_groups as describe_groups,
)
from lazyconv.protocol import (
    _find_coordinator as find_coordinator,
)
from lazyconv.protocol import (
    _heartbeat as heartbeat,
)
from lazyconv.protocol import (
    _join_group as join_group,
)
from lazyconv.protocol import (
    _leave_group as leave_group,
)
from lazyconv.protocol import (
    _list_groups as list_groups,
)
from lazyconv.protocol import (
    _offset_commit as offset_commit,
)
from lazyconv.protocol import (
    _offset_fetch as offset_fetch,
)
from lazyconv.protocol import (
    _sync_group as sync_group,
)
from lazyconv.protocol._api import ApiSpec
from lazyconv.protocol._error_messages import kafka_message
from lazyconv.protocol._error_response import error_response

log = logging.getLogger(__name__)

__all__ = ["GroupRelay", "GROUP_APIS"]

GROUP_APIS: tuple[ApiSpec, ...] = (find_coordinator.SPEC, join_group.SPEC, sync_group.SPEC,
                                   heartbeat.SPEC, leave_group.SPEC, offset_commit.SPEC,
                                   offset_fetch.SPEC, describe_groups.SPEC, list_groups.SPEC)
# OffsetFetch v8 batches groups, which may have different coordinators; one group per request
# keeps a request one coordinator's (gateway._apis answers v8+ by the API relay)
_UPSTREAM_CAPS: dict[int, int] = {offset_fetch.SPEC.key: 7}

_MEMBER_ID_REQUIRED = int(ErrorCode.MEMBER_ID_REQUIRED)
_FIRST_MEMBER_ID_REQUIRED_VERSION = 4
_MAX_JOINED = 100_000  # members remembered (least recently joined forgotten first)


class GroupRelay:
    """Answers the group APIs through the group coordinators of the upstream cluster."""

    def __init__(self, cluster: UpstreamCluster, coordinators: Coordinators | None = None) -> None:
        self.cluster = cluster
        self.coordinators = coordinators if coordinators is not None else Coordinators(cluster)
        # (group id, member id) -> (protocol type, protocol name) of the member's last join:
        # SyncGroup v5+ must repeat them and old clients do not send them. A client may send
        # its JoinGroup and SyncGroup on different connections, so this is the relay's.
        self._joined: OrderedDict[tuple[str, str], tuple[str | None, str | None]] = OrderedDict()

    # -- coordinators ---------------------------------------------------------------------

    async def coordinator(self, session: UpstreamSession, group_id: str,
                          throttles: list[int] | None = None) -> int:
        """The node id of ``group_id``'s coordinator (cached); raises UpstreamError. The
        throttle time of the cluster's answer, when it was asked, is added to ``throttles``."""
        return await self.coordinators.find(session, find_coordinator.GROUP_KEY, group_id,
                                            throttles)

    def forget(self, session: UpstreamSession, group_id: str) -> None:
        self.coordinators.forget(session, find_coordinator.GROUP_KEY, group_id)

    async def find_coordinator(self, session: UpstreamSession, version: int,
                               request: dict[str, Any], me: Any) -> dict[str, Any]:
        """The gateway coordinates every group and transactional id the cluster has a
        coordinator for (each key's requests are relayed to the real one)."""
        keys = request["coordinator_keys"] if version >= 4 else [request["key"]]
        key_type = request.get("key_type", find_coordinator.GROUP_KEY) if version >= 1 else \
            find_coordinator.GROUP_KEY
        throttles: list[int] = []  # of the cluster's answers (none for a cached coordinator)

        async def find(key: str) -> int:
            try:
                await self.coordinators.find(session, key_type, key, throttles)
            except CoordinatorError as exc:
                return exc.code
            except UpstreamError as exc:
                self.cluster.state.warn("FindCoordinator upstream", exc)
                return int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return 0

        codes = await asyncio.gather(*(find(key) for key in keys))
        results = []
        for key, code in zip(keys, codes, strict=True):
            # Kafka's message is its Errors' message(): the error's own text, and for no error
            # "" in a v4+ coordinator, "NONE" at v1-3 (as Kafka 4.0.1 and 3.9.0 answer it)
            results.append({"key": key, "node_id": me.node_id if not code else -1,
                            "host": me.host if not code else "", "port": me.port if not code else -1,
                            "error_code": code, "error_message": kafka_message(code) if code else ""})
        throttle = max(throttles, default=0)
        if version >= 4:
            return {"throttle_time_ms": throttle, "coordinators": results}
        first = results[0]
        return {"throttle_time_ms": throttle, "error_code": first["error_code"],
                "error_message": first["error_message"] or "NONE",
                "node_id": first["node_id"], "host": first["host"], "port": first["port"]}

    # -- per-group requests ---------------------------------------------------------------

    async def relay(self, session: UpstreamSession, spec: ApiSpec, version: int,
                    request: dict[str, Any]) -> dict[str, Any]:
        """One group request to its coordinator, translated both ways."""
        key = spec.key
        if key == describe_groups.SPEC.key:
            return await self._describe_groups(session, version, request)
        if key == list_groups.SPEC.key:
            return await self._list_groups(session, version, request)
        group_id = request["group_id"]
        found: list[int] = []  # the throttle time of the cluster's FindCoordinator answer
        try:
            node = await self.coordinator(session, group_id, found)
            conn = await session.connection(node)
            upstream_version = min(conn.version(spec), _UPSTREAM_CAPS.get(key, spec.max_version))
            body = _upstream_request(spec, version, upstream_version, request)
            if key == sync_group.SPEC.key and body.get("protocol_type") is None:
                joined = self._joined.get((group_id, body["member_id"]))
                if joined is not None:
                    body["protocol_type"], body["protocol_name"] = joined
            answer = await conn.request(spec, upstream_version, body,
                                        timeout=self._timeout(spec, body))
            if (key == join_group.SPEC.key and answer["error_code"] == _MEMBER_ID_REQUIRED
                    and version < _FIRST_MEMBER_ID_REQUIRED_VERSION):
                body = {**body, "member_id": answer["member_id"]}
                answer = await conn.request(spec, upstream_version, body,
                                            timeout=self._timeout(spec, body))
        except CoordinatorError as exc:
            return _longest_throttle(error_response(spec, version, request, exc.code), found)
        except UpstreamError as exc:
            self.cluster.state.warn(f"{spec.name} at a group coordinator", exc)
            self.forget(session, group_id)
            return error_response(spec, version, request, int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        log.debug("%s v%d (upstream v%d) for group %r: %r -> %r", spec.name, version,
                  upstream_version, group_id, body, answer)
        if key == join_group.SPEC.key and not answer["error_code"]:
            self._joined[(group_id, answer["member_id"])] = (
                answer.get("protocol_type") or body["protocol_type"], answer.get("protocol_name"))
            self._joined.move_to_end((group_id, answer["member_id"]))
            while len(self._joined) > _MAX_JOINED:
                self._joined.popitem(last=False)
        elif key == leave_group.SPEC.key:
            for member in body.get("members") or [{"member_id": body.get("member_id")}]:
                self._joined.pop((group_id, member["member_id"]), None)
        if _response_codes(spec, answer) & COORDINATOR_ERRORS:
            self.forget(session, group_id)
        return _longest_throttle(
            _downstream_response(spec, version, upstream_version, request, answer), found)

    def _timeout(self, spec: ApiSpec, body: dict[str, Any]) -> float:
        """A JoinGroup waits for the rebalance; anything else for a request timeout."""
        timeout = self.cluster.request_timeout
        if spec.key == join_group.SPEC.key:
            # a negative wait would time the request out at once (a retriable error the client
            # retries for ever) where the coordinator answers INVALID_SESSION_TIMEOUT
            timeout += max(body.get("rebalance_timeout_ms", 0), body["session_timeout_ms"], 0) / 1000
        return timeout

    async def _describe_groups(self, session: UpstreamSession, version: int,
                               request: dict[str, Any]) -> dict[str, Any]:
        results: dict[str, dict[str, Any]] = {}
        throttles: list[int] = []  # of every upstream answer it is made of

        async def describe(group_id: str) -> None:
            try:
                node = await self.coordinator(session, group_id, throttles)
                conn = await session.connection(node)
                uv = conn.version(describe_groups.SPEC)
                answer = await conn.request(describe_groups.SPEC, uv, {
                    "groups": [group_id], "include_authorized_operations": False})
                throttles.append(answer.get("throttle_time_ms", 0))
                if not answer["groups"]:  # a broken upstream: Kafka answers every group asked
                    raise UpstreamError(f"DescribeGroups answered nothing for {group_id!r}")
                results[group_id] = answer["groups"][0]
                if results[group_id]["error_code"] in COORDINATOR_ERRORS:
                    self.forget(session, group_id)  # the client's retry asks where it went
            except (CoordinatorError, UpstreamError) as exc:
                code = exc.code if isinstance(exc, CoordinatorError) else int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
                self.forget(session, group_id)
                results[group_id] = {"error_code": code, "group_id": group_id, "group_state": "",
                                     "protocol_type": "", "protocol_data": "", "members": []}

        await asyncio.gather(*(describe(g) for g in dict.fromkeys(request["groups"])))
        return {"throttle_time_ms": max(throttles, default=0),
                "groups": [results[g] for g in request["groups"]]}

    async def _list_groups(self, session: UpstreamSession, version: int,
                           request: dict[str, Any]) -> dict[str, Any]:
        if not self.cluster.brokers:
            await session.cluster.refresh([])
        groups: list[dict[str, Any]] = []
        errors: list[int] = []
        throttles: list[int] = []

        async def ask(node: int) -> None:
            try:
                conn = await session.connection(node)
                uv = conn.version(list_groups.SPEC)
                answer = await conn.request(list_groups.SPEC, uv, {
                    "states_filter": request.get("states_filter") or [],
                    "types_filter": request.get("types_filter") or []})
            except UpstreamError as exc:
                self.cluster.state.broker_failed(node, "ListGroups", exc)
                errors.append(int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
                return
            throttles.append(answer.get("throttle_time_ms", 0))
            if answer["error_code"]:
                errors.append(answer["error_code"])
            groups.extend(answer["groups"])

        await asyncio.gather(*(ask(node) for node in sorted(self.cluster.brokers)))
        return {"throttle_time_ms": max(throttles, default=0),
                "error_code": errors[0] if errors and not groups else 0, "groups": groups}


def _upstream_request(spec: ApiSpec, version: int, upstream_version: int,
                      request: dict[str, Any]) -> dict[str, Any]:
    body = dict(request)
    key = spec.key
    if key == join_group.SPEC.key and version == 0:
        body["rebalance_timeout_ms"] = body["session_timeout_ms"]  # what Kafka used for v0
    elif key == leave_group.SPEC.key and version < 3 <= upstream_version:
        body["members"] = [{"member_id": body["member_id"], "group_instance_id": None}]
    elif key == offset_commit.SPEC.key and version == 0:
        body["generation_id_or_member_epoch"] = -1
        body["member_id"] = ""
    return body


def _downstream_response(spec: ApiSpec, version: int, upstream_version: int,
                         request: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    if spec.key == offset_fetch.SPEC.key and version < 2 and answer.get("error_code"):
        # v2+ carries a group's error (a coordinator moved, the group refused) at the top only,
        # which v0-1 do not have: on every partition asked, as Kafka answered those versions
        return error_response(spec, version, request, answer["error_code"])
    if spec.key == join_group.SPEC.key and answer.get("protocol_name") is None and version < 7:
        # null from v7 on (an error answer); an empty string before
        return {**answer, "protocol_name": ""}
    if spec.key == leave_group.SPEC.key and version < 3 <= upstream_version:
        code = answer["error_code"]
        if not code and answer.get("members"):
            code = answer["members"][0]["error_code"]
        return {"throttle_time_ms": answer.get("throttle_time_ms", 0), "error_code": code}
    return answer


def _longest_throttle(answer: dict[str, Any], throttles: list[int]) -> dict[str, Any]:
    """``answer`` saying the longest of its own throttle time and ``throttles`` (those of the
    other upstream answers it is made of: a coordinator looked up)."""
    if throttles and max(throttles) > answer.get("throttle_time_ms", 0):
        return {**answer, "throttle_time_ms": max(throttles)}
    return answer


def _response_codes(spec: ApiSpec, answer: dict[str, Any]) -> set[int]:
    codes = set()
    if "error_code" in answer:
        codes.add(answer["error_code"])
    for topic in answer.get("topics") or ():
        for part in topic.get("partitions") or ():
            codes.add(part.get("error_code", 0))
    return codes
