"""``lazyconv gateway``: old Kafka clients in front of a Kafka 4 cluster.

Kafka 4.0 removed the protocol versions older than Kafka 2.1 and the broker's down-conversion;
the gateway speaks those versions to old clients and only Kafka 4's versions to the cluster,
converting in the middle (docs/guide/gateway.md).

- :mod:`~lazyconv.gateway._gateway`: :class:`Gateway`, the asyncio server (on :mod:`lazyconv.net`).
- :mod:`~lazyconv.gateway._handler`: dispatch, Metadata (the gateway as the whole cluster),
  ListOffsets; :mod:`~lazyconv.gateway._fetch_relay` and :mod:`~lazyconv.gateway._produce_relay`.
- :mod:`~lazyconv.gateway._upstream`: connections to the real brokers, ApiVersions, metadata cache;
  :mod:`~lazyconv.gateway._floor`: never a version below Kafka 4.0's floor;
  :mod:`~lazyconv.gateway._error_map`: upstream error codes as old clients can read them.
"""

from lazyconv.gateway._gateway import Gateway

__all__ = ["Gateway"]
