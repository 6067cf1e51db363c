"""How a server command's log lines look: a timestamp on each, and the connection they concern.

``lazyconv gateway --log-format text`` (the default) writes ``TIME lazyconv gateway: LEVEL:
MESSAGE``, with ``[connection N, client 'ID', PRINCIPAL, LISTENER]`` after a line logged while
serving a connection; ``--log-format json`` writes one JSON object per line with the same
fields (``time``, ``level``, ``logger``, ``message``, and ``connection_id``, ``client_id``,
``principal``, ``listener``, ``peer`` when the line concerns a connection), for log shippers.
The connection is the one whose task (or conversion step) logged the line:
:data:`lazyconv.net._session.current_session`, captured when the line is made.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone
from typing import Any, TextIO

from lazyconv._commands._common import one_line
from lazyconv.net._session import current_session

log = logging.getLogger(__name__)

__all__ = ["SessionContext", "TextFormatter", "JsonFormatter", "ReopenableFileHandler",
           "use_log_format"]


class SessionContext(logging.Filter):
    """Puts the running connection's session on each record (``record.session``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.session = current_session.get()
        return True


def _time(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds")


def _context(record: logging.LogRecord) -> dict[str, Any]:
    session = getattr(record, "session", None)
    if session is None:
        return {}
    return {"connection_id": session.connection_id, "client_id": session.client_id,
            "principal": session.principal, "listener": session.listener.label,
            "peer": session.peer.lstrip("/")}


class TextFormatter(logging.Formatter):
    """``2026-01-02T03:04:05.678+00:00 lazyconv gateway: warning: message [connection 7, ...]``
    (with ``verbose``, the logger's name after the level)."""

    def __init__(self, command: str, verbose: bool) -> None:
        super().__init__()
        self.command = command
        self.verbose = verbose

    def format(self, record: logging.LogRecord) -> str:
        where = f" [{record.name}]" if self.verbose else ""
        text = (f"{_time(record)} lazyconv {self.command}: {record.levelname.lower()}{where}: "
                f"{record.getMessage()}")
        context = _context(record)
        if context:
            client = f", client {context['client_id']!r}" if context["client_id"] else ""
            text += (f" [connection {context['connection_id']}{client}, {context['principal']}, "
                     f"{context['listener']}]")
        text = one_line(text)  # a client's string with a line end must not forge a line
        if record.exc_info and self.verbose:
            text += "\n" + self.formatException(record.exc_info)
        return text


class JsonFormatter(logging.Formatter):
    """One JSON object per line (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {"time": _time(record), "level": record.levelname.lower(),
                                "logger": record.name, "message": record.getMessage()}
        line.update(_context(record))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class ReopenableFileHandler(logging.FileHandler):
    """A log file that :meth:`reopen` opens again (after logrotate moved it: SIGHUP)."""

    lazyconv_cli = True  # the command line's own handler (replaced when it configures again)

    def reopen(self) -> None:
        """The file at the path opened again; one that cannot be (its directory gone) leaves
        the one in use open, and says so in it (never a log closed for good)."""
        failed: OSError | None = None
        self.acquire()
        try:
            try:
                stream = self._open()
            except OSError as exc:
                failed = exc
            else:
                old, self.stream = self.stream, stream
                if old is not None:
                    old.close()
        finally:
            self.release()
        if failed is not None:
            log.error("cannot open the log file again, still writing to the one open: %s", failed)


def use_log_format(command: str, log_format: str, verbose: bool, log_file: str | None = None,
                   stream: TextIO | None = None) -> logging.Handler:
    """Replace the root logger's handlers by one writing ``log_format`` ("text" or "json") to
    ``log_file`` (or ``stream``, default stderr); returns it."""
    handler: logging.Handler
    if log_file is not None:
        handler = ReopenableFileHandler(log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
        handler.lazyconv_cli = True  # type: ignore[attr-defined]
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter(command, verbose))
    handler.addFilter(SessionContext())
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "lazyconv_cli", False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    return handler
