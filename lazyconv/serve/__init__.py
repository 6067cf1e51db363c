"""A small Kafka-protocol endpoint over a log directory (the only layer, with the CLI, that
touches sockets).

- :mod:`lazyconv.serve.logdir`: topics, partitions, segments; offsets → byte ranges.
- :mod:`lazyconv.serve.broker`: answers requests (sans-IO apart from the log files).
- :mod:`lazyconv.serve.server`: asyncio listeners, framing, Sends written with backpressure.
"""

from lazyconv.serve.broker import Broker, Listener, TopicConfig
from lazyconv.serve.logdir import LogDirectory
from lazyconv.serve.server import KafkaServer, ListenerSpec

__all__ = ["Broker", "Listener", "TopicConfig", "LogDirectory", "KafkaServer", "ListenerSpec"]
