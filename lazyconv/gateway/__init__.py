"""``lazyconv gateway``: every Kafka client in front of a Kafka 4 cluster.

Kafka 4.0 removed the protocol versions older than Kafka 2.1 and the broker's down-conversion;
the gateway speaks those versions to old clients and only Kafka 4's versions to the cluster,
converting in the middle, and relays every other API the cluster serves for modern clients,
each client under its own client id (docs/guide/gateway.md).

- :mod:`~lazyconv.gateway._gateway`: :class:`Gateway`, the asyncio server (on :mod:`lazyconv.net`).
- :mod:`~lazyconv.gateway._handler`: dispatch along :mod:`~lazyconv.gateway._apis`' table, built
  from the cluster's ApiVersions; Metadata (the gateway as the whole cluster), ListOffsets;
  :mod:`~lazyconv.gateway._fetch_relay` and :mod:`~lazyconv.gateway._produce_relay`.
- :mod:`~lazyconv.gateway._api_relay` (with :mod:`~lazyconv.gateway._relayed`,
  :mod:`~lazyconv.gateway._config_relay`): every API the cluster serves, relayed as it came to
  where Kafka routes it; :mod:`~lazyconv.gateway._coordinators`: the real coordinators;
  :mod:`~lazyconv.gateway._rewrite`: answers naming the gateway as the only broker.
- :mod:`~lazyconv.gateway._settings`: :class:`GatewaySettings`, from ``--config`` (broker
  property names) and ``--upstream-config`` (a Kafka client properties file);
  :mod:`~lazyconv.gateway._identity`: the identity modes (passthrough, gateway);
  :mod:`~lazyconv.gateway._upstream_security`: TLS and SASL toward the cluster.
- :mod:`~lazyconv.gateway._upstream`: connections to the real brokers, ApiVersions, metadata
  cached per upstream identity;
  :mod:`~lazyconv.gateway._floor`: never a version below Kafka 4.0's floor;
  :mod:`~lazyconv.gateway._error_map`: upstream error codes as old clients can read them.
- Running it as a service: :mod:`~lazyconv.gateway._metrics` (Prometheus metrics),
  :mod:`~lazyconv.gateway._clients` (the clients report), :mod:`~lazyconv.gateway._releases`
  (the Kafka release a client's versions imply), :mod:`~lazyconv.gateway._cluster_state` (the
  cluster's reachability, logged once per change), :mod:`~lazyconv.gateway._admin` (the HTTP
  listener of /metrics, /health/live, /health/ready, /clients).
"""

from lazyconv.gateway._gateway import Gateway
from lazyconv.gateway._settings import GatewaySettings

__all__ = ["Gateway", "GatewaySettings"]
