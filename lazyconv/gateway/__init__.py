"""``lazyconv gateway``: old Kafka clients in front of a Kafka 4 cluster.

Kafka 4.0 removed the protocol versions older than Kafka 2.1 and the broker's down-conversion;
the gateway speaks those versions to old clients and only Kafka 4's versions to the cluster,
converting in the middle (docs/guide/gateway.md).

- :mod:`~lazyconv.gateway.gateway`: :class:`Gateway`, the asyncio server (on :mod:`lazyconv.net`).
- :mod:`~lazyconv.gateway.handler`: dispatch, Metadata (the gateway as the whole cluster),
  ListOffsets; :mod:`~lazyconv.gateway.fetch_relay` and :mod:`~lazyconv.gateway.produce_relay`.
- :mod:`~lazyconv.gateway.upstream`: connections to the real brokers, ApiVersions, metadata cache;
  :mod:`~lazyconv.gateway.floor`: never a version below Kafka 4.0's floor;
  :mod:`~lazyconv.gateway.error_map`: upstream error codes as old clients can read them.
"""

from lazyconv.gateway.gateway import Gateway

__all__ = ["Gateway"]
