"""A small Kafka-protocol endpoint over a log directory (the only layer, with the CLI, that
touches sockets).

- :mod:`lazyconv.serve.server`: the request loop: asyncio listeners, framing, Sends written
  with backpressure.
- :mod:`lazyconv.serve.broker`: dispatches requests by API key (sans-IO apart from the log
  files); :mod:`~lazyconv.serve.fetch_handler` answers Fetch.
- :mod:`lazyconv.serve.logdir`: topics, partitions, segments; offsets → byte ranges;
  :mod:`~lazyconv.serve.topic_ids` keeps topic ids in ``partition.metadata``.
- :mod:`lazyconv.serve.group_coordinator` (sans-IO state machine), :mod:`~lazyconv.serve.group_apis`
  (the group APIs on the wire) and :mod:`~lazyconv.serve.offset_store` (committed offsets).
- :mod:`lazyconv.serve.transactions`: per-partition transaction state and ``.txnindex``.
"""

from lazyconv.serve.broker import Broker, Listener, TopicConfig
from lazyconv.serve.logdir import LogDirectory
from lazyconv.serve.server import KafkaServer, ListenerSpec

__all__ = ["Broker", "Listener", "TopicConfig", "LogDirectory", "KafkaServer", "ListenerSpec"]
