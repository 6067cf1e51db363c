"""What the Kafka-protocol endpoints share (``serve`` over a log directory, ``gateway`` in front
of a real cluster): the connection loop with its admission limits and timeouts
(:mod:`~lazyconv.net._server`, :mod:`~lazyconv.net._limits`), the front door every request
passes (:mod:`~lazyconv.net._requests`: parsing against the handler's table, ApiVersions, the
:class:`RequestHandler` contract), one :class:`Session` per connection
(:mod:`~lazyconv.net._session`), listeners and responses (:mod:`~lazyconv.net._model`), the
worker pool conversions run on (:mod:`~lazyconv.net._workers`) and the observer a server tells
of its connections and requests (:mod:`~lazyconv.net._observer`).
"""

from lazyconv.net._limits import ConnectionLimits
from lazyconv.net._model import Listener, Response
from lazyconv.net._observer import CLOSE_REASONS, ServerObserver
from lazyconv.net._requests import FrontDoor, RequestHandler
from lazyconv.net._server import KafkaServer, ListenerSpec
from lazyconv.net._session import Session, current_session
from lazyconv.net._workers import ConversionWorkers

__all__ = ["CLOSE_REASONS", "ConnectionLimits", "ConversionWorkers", "FrontDoor", "KafkaServer",
           "Listener", "ListenerSpec", "RequestHandler", "Response", "ServerObserver", "Session",
           "current_session"]
