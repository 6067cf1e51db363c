"""What the Kafka-protocol endpoints share (``serve`` over a log directory, ``gateway`` in front
of a real cluster): the connection loop with its framing, admission limits and timeouts
(:mod:`~lazyconv.net._server`, :mod:`~lazyconv.net._limits`), listeners and responses
(:mod:`~lazyconv.net._model`) and the worker pool conversions run on (:mod:`~lazyconv.net._workers`).
"""

from lazyconv.net._limits import ConnectionLimits
from lazyconv.net._model import Listener, RequestHandler, Response
from lazyconv.net._server import KafkaServer, ListenerSpec
from lazyconv.net._workers import ConversionWorkers

__all__ = ["ConnectionLimits", "ConversionWorkers", "KafkaServer", "Listener", "ListenerSpec",
           "RequestHandler", "Response"]
