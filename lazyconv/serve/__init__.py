"""A small Kafka-protocol endpoint over a log directory (the only layer, with the CLI, that
touches sockets).

- :mod:`lazyconv.net._server` (shared with the gateway): the request loop: asyncio listeners,
  framing, admission limits, Sends written with backpressure, conversions on every core.
- :mod:`lazyconv.serve._broker`: dispatches requests by API key (sans-IO apart from the log
  files); :mod:`~lazyconv.serve._fetch_handler` answers Fetch.
- The log directory itself (topics, partitions, segments; offsets → byte ranges; appends,
  segment rolls, indexes, log recovery on opening a partition, fsyncs and the recovery-point
  checkpoint, topic ids, transaction state and ``.txnindex``) is :mod:`lazyconv.logdir`'s.
- :mod:`lazyconv.serve._producer_state` (with Kafka's ``.snapshot`` files,
  :mod:`lazyconv.logdir._snapshot`) and :mod:`~lazyconv.serve._producer_ids` (ids recorded in
  blocks, never reused).
- :mod:`lazyconv.serve._group_coordinator` (sans-IO state machine), :mod:`~lazyconv.serve._group_apis`
  (the group APIs on the wire) and :mod:`~lazyconv.serve._offset_store` (committed offsets);
  :mod:`~lazyconv.serve._txn_coordinator` (transactional ids, markers).
"""

from lazyconv.logdir._directory import LogDirectory
from lazyconv.net._server import KafkaServer, ListenerSpec
from lazyconv.serve._append_validation import (
    AppendConfig,
    AppendDecision,
    ProducerStateTable,
    validate_produce,
)
from lazyconv.serve._broker import Broker, Listener, TopicConfig

__all__ = ["Broker", "Listener", "TopicConfig", "LogDirectory", "KafkaServer", "ListenerSpec",
           "AppendConfig", "AppendDecision", "ProducerStateTable", "validate_produce"]
