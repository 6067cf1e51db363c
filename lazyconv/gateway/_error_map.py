"""Upstream error codes as an old client can read them.

A Kafka 4 broker answers with error codes that did not exist when an old client was written
(KAFKA_STORAGE_ERROR came with Kafka 1.0, INVALID_RECORD with 2.0, the leader-epoch and topic-id
errors later still). A client that meets a code it does not know treats it as fatal, so the
gateway replaces each such code with the one an older broker sent in the same situation, as
Kafka itself did for old request versions (e.g. KAFKA_STORAGE_ERROR became
NOT_LEADER_FOR_PARTITION below Fetch v6). The table, per API:

==================================  ===================  =========================================
upstream code                        replaced below       by
==================================  ===================  =========================================
KAFKA_STORAGE_ERROR (56)             Fetch v6, Produce v4  NOT_LEADER_OR_FOLLOWER (6)
FENCED_LEADER_EPOCH (74)             every version        NOT_LEADER_OR_FOLLOWER (6): the gateway
UNKNOWN_LEADER_EPOCH (75)                                  sends no leader epoch, so these mean
                                                           "ask for metadata again"
OFFSET_NOT_AVAILABLE (78)            ListOffsets v5       LEADER_NOT_AVAILABLE (5)
LISTENER_NOT_FOUND (72)              Metadata v6          LEADER_NOT_AVAILABLE (5), as Kafka
                                                           answers Metadata v0–5
INVALID_RECORD (87)                  Produce v8           CORRUPT_MESSAGE (2)
UNKNOWN_TOPIC_ID (100)               Fetch v13            UNKNOWN_TOPIC_OR_PARTITION (3)
INCONSISTENT_TOPIC_ID (103)          Fetch v13            UNKNOWN_TOPIC_OR_PARTITION (3)
NOT_ENOUGH_REPLICAS (19/20)          –                    kept (known since Kafka 0.8.2)
anything else unknown to the era     Fetch/Produce v3      UNKNOWN_SERVER_ERROR (-1)
  of the client (> 43)
==================================  ===================  =========================================

Every code that reaches this map is counted by the metrics (``lazyconv_gateway_upstream_errors``,
and ``lazyconv_gateway_rewritten_errors`` for the ones replaced). Errors the gateway itself meets
(an upstream broker unreachable, a connection lost mid-request) are answered
NOT_LEADER_OR_FOLLOWER for partitions: retriable for every client version, and it makes the
client ask for metadata again, by which time the gateway has refreshed its own. A request any
broker answers gets REQUEST_TIMED_OUT when none does, a coordinator's COORDINATOR_NOT_AVAILABLE
(:mod:`lazyconv.gateway._api_relay`).
"""

from __future__ import annotations

from lazyconv.errors import ErrorCode
from lazyconv.gateway._metrics import session_metrics
from lazyconv.protocol import _fetch as fetch
from lazyconv.protocol import _list_offsets as list_offsets
from lazyconv.protocol import _metadata as metadata
from lazyconv.protocol import _produce as produce

__all__ = ["downstream_error", "RETRIABLE_ROUTING_ERRORS", "UNREACHABLE", "UPSTREAM_UNAVAILABLE"]

# the code for "the gateway could not reach the partition's leader": retriable everywhere
UNREACHABLE = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
# the code for "no upstream broker answered" a request any broker (or the controller through
# any broker) answers: retriable (a client's TimeoutException)
UPSTREAM_UNAVAILABLE = int(ErrorCode.REQUEST_TIMED_OUT)
_LEADER_NOT_AVAILABLE = 5
# a partition's leader lacks the listener the gateway asked on (Kafka sends it to Metadata v6+)
_LISTENER_NOT_FOUND = 72
# codes after which the gateway refreshes its metadata
RETRIABLE_ROUTING_ERRORS = frozenset({
    int(ErrorCode.NOT_LEADER_OR_FOLLOWER), _LEADER_NOT_AVAILABLE,
    int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), int(ErrorCode.FENCED_LEADER_EPOCH),
    int(ErrorCode.UNKNOWN_LEADER_EPOCH), int(ErrorCode.UNKNOWN_TOPIC_ID),
    int(ErrorCode.INCONSISTENT_TOPIC_ID), int(ErrorCode.KAFKA_STORAGE_ERROR),
    int(ErrorCode.REPLICA_NOT_AVAILABLE),
})
# The highest error code Kafka 0.10.2 defined (UNSUPPORTED_FOR_MESSAGE_FORMAT, 43): clients of
# Fetch/Produce below v3 predate every later one.
_OLD_ERA_MAX_CODE = 43

# api key -> [(code, first version that knows it, replacement)]
_REPLACEMENTS: dict[int, list[tuple[int, int, int]]] = {
    fetch.SPEC.key: [
        (int(ErrorCode.KAFKA_STORAGE_ERROR), 6, int(ErrorCode.NOT_LEADER_OR_FOLLOWER)),
        (int(ErrorCode.UNKNOWN_TOPIC_ID), 13, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)),
        (int(ErrorCode.INCONSISTENT_TOPIC_ID), 13, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)),
    ],
    produce.SPEC.key: [
        (int(ErrorCode.KAFKA_STORAGE_ERROR), 4, int(ErrorCode.NOT_LEADER_OR_FOLLOWER)),
        (int(ErrorCode.INVALID_RECORD), 8, int(ErrorCode.CORRUPT_MESSAGE)),
    ],
    metadata.SPEC.key: [
        (_LISTENER_NOT_FOUND, 6, _LEADER_NOT_AVAILABLE),
    ],
    list_offsets.SPEC.key: [
        (int(ErrorCode.OFFSET_NOT_AVAILABLE), 5, _LEADER_NOT_AVAILABLE),
        (int(ErrorCode.KAFKA_STORAGE_ERROR), 2, int(ErrorCode.NOT_LEADER_OR_FOLLOWER)),
    ],
}
_ALWAYS = {
    int(ErrorCode.FENCED_LEADER_EPOCH): int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
    int(ErrorCode.UNKNOWN_LEADER_EPOCH): int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
}


def downstream_error(api_key: int, version: int, code: int) -> int:
    """``code`` from the upstream cluster as a client of ``api_key`` v``version`` can read it
    (counted, with what it became, when metrics are on)."""
    if code == 0:
        return 0
    answer = _downstream_error(api_key, version, code)
    metrics = session_metrics()[1]
    if metrics is not None:
        metrics.upstream_error(api_key, code, answer)
    return answer


def _downstream_error(api_key: int, version: int, code: int) -> int:
    if code in _ALWAYS:
        return _ALWAYS[code]
    for known, since, replacement in _REPLACEMENTS.get(api_key, ()):
        if code == known and version < since:
            return replacement
    if (api_key in (fetch.SPEC.key, produce.SPEC.key) and version < 3
            and code > _OLD_ERA_MAX_CODE):
        return int(ErrorCode.UNKNOWN_SERVER_ERROR)
    return code
