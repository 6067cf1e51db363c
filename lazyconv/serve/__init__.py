"""``lazyconv serve``: a Kafka-protocol endpoint over a log directory.

- :mod:`lazyconv.serve._server`: :class:`LogServer`, the asyncio server ``lazyconv serve`` runs
  (on :mod:`lazyconv.net`, the connection layer it shares with the gateway: listeners, framing
  and the front door, admission limits, Sends written with backpressure, conversions on every
  core).
- :mod:`lazyconv.serve._broker`: the request handler, one table of handlers by API key
  (sans-IO apart from the log files); :mod:`~lazyconv.serve._fetch_handler` answers Fetch,
  :mod:`~lazyconv.serve._append_validation` decides what a Produce may append.
- The log directory itself (topics, partitions, segments; offsets → byte ranges; appends,
  segment rolls, indexes, log recovery on opening a partition, fsyncs and the recovery-point
  checkpoint, topic ids, transaction state and ``.txnindex``) is :mod:`lazyconv.logdir`'s.
- :mod:`lazyconv.serve._producer_table` (one partition's producers),
  :mod:`~lazyconv.serve._producer_state` (tables loaded from Kafka's ``.snapshot`` files) and
  :mod:`~lazyconv.serve._producer_ids` (ids recorded in blocks, never reused).
- :mod:`lazyconv.serve._group_coordinator` (sans-IO state machine), :mod:`~lazyconv.serve._group_apis`
  (the group APIs on the wire) and :mod:`~lazyconv.serve._offset_store` (committed offsets);
  :mod:`~lazyconv.serve._txn_coordinator` (transactional ids, markers) and
  :mod:`~lazyconv.serve._txn_apis` (the transaction APIs on the wire).
"""

from lazyconv.logdir._directory import LogDirectory
from lazyconv.net._model import Listener
from lazyconv.net._server import KafkaServer, ListenerSpec
from lazyconv.serve._append_validation import AppendConfig, AppendDecision, validate_produce
from lazyconv.serve._broker import Broker
from lazyconv.serve._model import TopicConfig
from lazyconv.serve._producer_table import ProducerStateTable
from lazyconv.serve._server import LogServer

__all__ = ["LogServer", "Broker", "Listener", "TopicConfig", "LogDirectory", "KafkaServer",
           "ListenerSpec", "AppendConfig", "AppendDecision", "ProducerStateTable",
           "validate_produce"]
