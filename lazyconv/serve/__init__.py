"""A small Kafka-protocol endpoint over a log directory (the only layer, with the CLI, that
touches sockets).

- :mod:`lazyconv.net.server` (shared with the gateway): the request loop: asyncio listeners,
  framing, admission limits, Sends written with backpressure, conversions on every core.
- :mod:`lazyconv.serve.broker`: dispatches requests by API key (sans-IO apart from the log
  files); :mod:`~lazyconv.serve.fetch_handler` answers Fetch.
- :mod:`lazyconv.serve.logdir`: topics, partitions, segments; offsets → byte ranges; appends
  (segment rolls, :mod:`~lazyconv.serve.segment_index`, failed writes undone);
  :mod:`~lazyconv.serve.log_recovery` on opening a partition; :mod:`~lazyconv.serve.durability`
  (fsyncs, the recovery-point checkpoint); :mod:`~lazyconv.serve.topic_ids` keeps topic ids in
  ``partition.metadata``.
- :mod:`lazyconv.serve.producer_state` (with Kafka's ``.snapshot`` files,
  :mod:`~lazyconv.serve.producer_snapshot`) and :mod:`~lazyconv.serve.producer_ids` (ids
  recorded in blocks, never reused).
- :mod:`lazyconv.serve.group_coordinator` (sans-IO state machine), :mod:`~lazyconv.serve.group_apis`
  (the group APIs on the wire) and :mod:`~lazyconv.serve.offset_store` (committed offsets).
- :mod:`lazyconv.serve.transactions`: per-partition transaction state and ``.txnindex``.
"""

from lazyconv.net.server import KafkaServer, ListenerSpec
from lazyconv.serve.broker import Broker, Listener, TopicConfig
from lazyconv.serve.logdir import LogDirectory

__all__ = ["Broker", "Listener", "TopicConfig", "LogDirectory", "KafkaServer", "ListenerSpec"]
