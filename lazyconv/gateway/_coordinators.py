"""The real coordinators of groups and transactional ids, found upstream and cached.

The gateway answers every FindCoordinator with itself; a request for a group or a transactional
id is then sent to the coordinator the cluster names for that key (FindCoordinator key type 0
or 1, asked on the client's own upstream connection). The answer is cached per (upstream identity, key type, key): whether a group or a transactional
id is found says nothing to another principal. It is forgotten when a coordinator says it is not (or not yet) the one — NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS — or cannot be reached, so the next
request asks again; the client sees those retriable errors as they are.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

from lazyconv.errors import ErrorCode, UpstreamError
from lazyconv.gateway._upstream import UpstreamCluster, UpstreamSession
from lazyconv.gateway._upstream_security import ANONYMOUS_IDENTITY
from lazyconv.protocol import _find_coordinator as find_coordinator

log = logging.getLogger(__name__)

__all__ = ["Coordinators", "CoordinatorError", "COORDINATOR_ERRORS"]

#: codes after which a cached coordinator is forgotten
COORDINATOR_ERRORS = frozenset({int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
                                int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                                int(ErrorCode.NOT_COORDINATOR)})
_MAX_CACHED = 100_000  # keys remembered (the least recently found forgotten first)


class CoordinatorError(Exception):
    """The cluster answered FindCoordinator with an error ``code`` (for the client as it is)."""

    def __init__(self, code: int) -> None:
        super().__init__(f"coordinator error {code}")
        self.code = code


class Coordinators:
    """The node id of the coordinator of each (upstream identity, key type, key), shared by
    the clients of each identity."""

    def __init__(self, cluster: UpstreamCluster) -> None:
        self.cluster = cluster
        self._nodes: OrderedDict[tuple[str, int, str], int] = OrderedDict()

    def cached(self, key_type: int, key: str, identity: str = ANONYMOUS_IDENTITY.key) -> int | None:
        """The cached coordinator of ``key`` for ``identity`` (``None`` when not known)."""
        return self._nodes.get((identity, key_type, key))

    async def find(self, session: UpstreamSession, key_type: int, key: str,
                   throttles: list[int] | None = None) -> int:
        """The coordinator's node id (cached); raises :class:`CoordinatorError` when the
        cluster answers with an error and :class:`~lazyconv.errors.UpstreamError` when no
        broker can be asked. The throttle time of the cluster's answer, when it was asked, is
        added to ``throttles`` (a quota's: the client's answer made of it carries it)."""
        cache_key = (session.identity.key, key_type, key)
        node = self._nodes.get(cache_key)
        if node is not None and node in self.cluster.brokers:
            return node
        conn = await session.any_connection()
        version = conn.version(find_coordinator.SPEC)
        body: dict[str, Any] = {"key": key, "key_type": key_type, "coordinator_keys": [key]}
        if version == 0 and key_type != find_coordinator.GROUP_KEY:
            raise CoordinatorError(int(ErrorCode.INVALID_REQUEST))  # v0 finds groups only
        answer = await conn.request(find_coordinator.SPEC, version, body)
        if throttles is not None:
            throttles.append(answer.get("throttle_time_ms", 0))
        if version >= 4:
            if not answer["coordinators"]:  # a broken upstream: Kafka answers every key asked
                raise UpstreamError(f"FindCoordinator v{version} answered no coordinator for {key!r}")
            entry = answer["coordinators"][0]
            code, node = entry["error_code"], entry["node_id"]
        else:
            code, node = answer["error_code"], answer["node_id"]
        if code:
            raise CoordinatorError(code)
        if node not in self.cluster.brokers:
            await session.cluster.refresh([])
        self._nodes[cache_key] = node
        self._nodes.move_to_end(cache_key)
        while len(self._nodes) > _MAX_CACHED:
            self._nodes.popitem(last=False)
        return node

    def forget(self, session: UpstreamSession, key_type: int, key: str) -> None:
        self._nodes.pop((session.identity.key, key_type, key), None)
