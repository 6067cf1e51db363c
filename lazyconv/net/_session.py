"""One client connection as a server knows it: where it came in, who it is, what it used.

The connection loop (:mod:`lazyconv.net._server`) makes a :class:`Session` when a client
connects and passes it with every request; the front door (:mod:`lazyconv.net._requests`)
keeps it current (client id, software name and version from ApiVersions v3+, the API versions
used), and the request handler hangs its own per-connection state on :attr:`Session.state`
(the gateway: the client's upstream connections). Whatever concerns a client — its identity,
records of what it did, its metrics — hangs off its session, never off a handler's locals.

:data:`current_session` is the session of the connection the running code serves: the
connection loop sets it in each connection's task (and the conversion worker pool carries it
into its threads), so a log line or a counter deep in a handler finds its client without being
handed it.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from lazyconv.net._model import Listener

__all__ = ["Session", "ANONYMOUS", "current_session"]

#: Kafka's principal for a connection that did not authenticate.
ANONYMOUS = "User:ANONYMOUS"

_connection_ids = itertools.count(1)


@dataclass(eq=False)
class Session:
    """One client connection (see the module docstring).

    ``peer`` is the client's address as Kafka's DescribeGroups shows it (``"/127.0.0.1"``);
    ``address`` the socket's own (host, port) when known; ``principal`` who the client is
    (``User:ANONYMOUS`` until a listener's authentication says otherwise); ``api_versions``
    counts the requests by (API key, version).
    """

    listener: Listener
    peer: str = ""
    address: tuple[Any, ...] | None = None
    connection_id: int = field(default_factory=lambda: next(_connection_ids))
    principal: str = ANONYMOUS
    client_id: str | None = None
    client_software_name: str | None = None
    client_software_version: str | None = None
    opened_at: float = field(default_factory=time.time)
    api_versions: Counter[tuple[int, int]] = field(default_factory=Counter)
    #: the request handler's own state for this connection (closed with it when it has close())
    state: Any = None
    #: (API key, version) of the request being answered, or of the last one
    request: tuple[int, int] | None = None
    #: request bytes read and response bytes written (size fields included)
    bytes_in: int = 0
    bytes_out: int = 0
    #: records the client sent (Produce) and received (Fetch), where the handler counts them
    records_in: int = 0
    records_out: int = 0
    #: when its last request was answered (time.time())
    last_seen: float = field(default_factory=time.time)
    #: waiting for its next request (nothing of one read yet): a draining server may close it
    idle: bool = False
    #: until when (the event loop's clock) none of its requests is acted on: a quota's
    #: throttle, as Kafka mutes a throttled channel; the answers it is owed still go out
    muted_until: float = 0.0
    #: the caller writes :class:`~lazyconv.net._model.Deferred` answers in order (the
    #: connection loop): a handler may act on the next request before answering this one
    may_defer: bool = False
    #: the server's observer (lazyconv.net._observer), for code that has the session only
    observer: Any = None
    #: what the server's observer keeps for this connection (the gateway: the client's record)
    record: Any = None

    def __repr__(self) -> str:
        who = f" {self.client_id!r}" if self.client_id else ""
        return f"Session({self.connection_id} from {self.peer or '?'}{who}, {self.principal})"

    def close(self) -> None:
        """Release the handler's state, if it has anything to release."""
        state, self.state = self.state, None
        close = getattr(state, "close", None)
        if close is not None:
            close()


#: The session of the connection the running code serves (``None`` outside a connection).
current_session: ContextVar[Session | None] = ContextVar("lazyconv_session", default=None)
