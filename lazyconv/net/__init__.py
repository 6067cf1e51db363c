"""What the Kafka-protocol endpoints share (``serve`` over a log directory, ``gateway`` in front
of a real cluster): the connection loop with its framing, admission limits and timeouts
(:mod:`~lazyconv.net.server`, :mod:`~lazyconv.net.limits`), listeners and responses
(:mod:`~lazyconv.net.model`) and the worker pool conversions run on (:mod:`~lazyconv.net.workers`).
"""

from lazyconv.net.limits import ConnectionLimits
from lazyconv.net.model import Listener, RequestHandler, Response
from lazyconv.net.server import KafkaServer, ListenerSpec
from lazyconv.net.workers import ConversionWorkers

__all__ = ["ConnectionLimits", "ConversionWorkers", "KafkaServer", "Listener", "ListenerSpec",
           "RequestHandler", "Response"]
