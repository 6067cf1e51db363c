"""SIGHUP while the command starts: counted, not the end of the process.

SIGHUP's default action ends a process. ``lazyconv gateway`` reloads on it, but its event loop
takes the signal only once the gateway has started; before that (the imports, the arguments,
the settings, reaching the cluster) a reload sent by a service manager right after the start
(``ExecReload=kill -HUP $MAINPID``), or by a certificate renewal's hook, ended it — and systemd
counts an end by SIGHUP as a clean exit, so ``Restart=on-failure`` does not start it again.

:func:`held_sighup` is the CLI's first statement: inside it a SIGHUP is counted and nothing
else. Once the arguments are parsed, a command registered with :func:`reloads_on_sighup` (the
gateway) keeps the count and reloads once it has started (:meth:`HeldSighup.take`); for every
other command the previous disposition is back at once (:meth:`HeldSighup.release`) and a
SIGHUP counted meanwhile is raised again, so it does what it did before (by default, end the
process). Only the interpreter's own start and the import of the ``lazyconv`` package come
before: SIGHUP keeps its default action there (docs/guide/gateway.md, "Running it as a
service").
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["HeldSighup", "held_sighup", "reloads_on_sighup", "reloads_on"]

_F = TypeVar("_F", bound=Callable[..., Any])

# the sub-commands' handlers that reload on SIGHUP
_RELOADING: set[Callable[..., Any]] = set()


def reloads_on_sighup(handler: _F) -> _F:
    """Mark a sub-command's handler as one that reloads on SIGHUP: it keeps what
    :func:`held_sighup` counted while the command started (a decorator)."""
    _RELOADING.add(handler)
    return handler


def reloads_on(handler: object) -> bool:
    """Whether ``handler`` was marked with :func:`reloads_on_sighup`."""
    return handler in _RELOADING


class HeldSighup:
    """SIGHUP counted instead of acted on (see the module docstring). ``active``: its handler
    is installed (in the main thread only, where signal handlers live; elsewhere nothing is
    counted)."""

    def __init__(self) -> None:
        self.count = 0
        self.active = False
        self._previous: Any = signal.SIG_DFL

    def _install(self) -> None:
        previous = signal.signal(signal.SIGHUP, self._counted)
        # None: a handler installed outside Python; SIG_DFL is what it stands for here
        self._previous = signal.SIG_DFL if previous is None else previous
        self.active = True

    def _counted(self, signum: int, frame: object) -> None:
        self.count += 1

    def take(self) -> int:
        """The SIGHUPs counted since the last take (then none are)."""
        count, self.count = self.count, 0
        return count

    def release(self) -> None:
        """Put the previous disposition back; a SIGHUP counted and not taken is raised again,
        so it does what it would have done (by default, end the process)."""
        if not self.active:
            return
        self.active = False
        signal.signal(signal.SIGHUP, self._previous)  # runs a SIGHUP pending: counted
        if self.take():
            signal.raise_signal(signal.SIGHUP)


_current: HeldSighup | None = None


@contextlib.contextmanager
def held_sighup() -> Iterator[HeldSighup]:
    """SIGHUP counted, not acted on, inside the block; an enclosing block's count is the one
    used (the CLI's, then the command's). At the end of the outermost block the previous
    disposition is back (:meth:`HeldSighup.release`)."""
    global _current
    if _current is not None:
        yield _current
        return
    held = HeldSighup()
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    held._install()
    _current = held
    try:
        yield held
    finally:
        _current = None
        held.release()
