"""A small Kafka-protocol endpoint over a log directory (the only layer, with the CLI, that
touches sockets).

- :mod:`lazyconv.net.server` (shared with the gateway): the request loop: asyncio listeners,
  framing, admission limits, Sends written with backpressure, conversions on every core.
- :mod:`lazyconv.serve.broker`: dispatches requests by API key (sans-IO apart from the log
  files); :mod:`~lazyconv.serve.fetch_handler` answers Fetch.
- The log directory itself (topics, partitions, segments; offsets → byte ranges; appends,
  segment rolls, indexes, log recovery on opening a partition, fsyncs and the recovery-point
  checkpoint, topic ids, transaction state and ``.txnindex``) is :mod:`lazyconv.logdir`'s.
- :mod:`lazyconv.serve.producer_state` (with Kafka's ``.snapshot`` files,
  :mod:`lazyconv.logdir.snapshot`) and :mod:`~lazyconv.serve.producer_ids` (ids recorded in
  blocks, never reused).
- :mod:`lazyconv.serve.group_coordinator` (sans-IO state machine), :mod:`~lazyconv.serve.group_apis`
  (the group APIs on the wire) and :mod:`~lazyconv.serve.offset_store` (committed offsets);
  :mod:`~lazyconv.serve.txn_coordinator` (transactional ids, markers).
"""

from lazyconv.logdir.directory import LogDirectory
from lazyconv.net.server import KafkaServer, ListenerSpec
from lazyconv.serve.append_validation import (
    AppendConfig,
    AppendDecision,
    ProducerStateTable,
    validate_produce,
)
from lazyconv.serve.broker import Broker, Listener, TopicConfig

__all__ = ["Broker", "Listener", "TopicConfig", "LogDirectory", "KafkaServer", "ListenerSpec",
           "AppendConfig", "AppendDecision", "ProducerStateTable", "validate_produce"]
