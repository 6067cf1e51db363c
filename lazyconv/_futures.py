"""One asyncio future worked out from another without a task of its own.

A task per request costs the event loop more than most of what a relay does with an answer;
:func:`chained` gets the same outcome from two done-callbacks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

__all__ = ["chained"]

T = TypeVar("T")
U = TypeVar("U")


def chained(source: asyncio.Future[T], settle: Callable[[T], U], *,
            on_error: Callable[[Exception], U] | None = None) -> asyncio.Future[U]:
    """A future of ``settle(result)`` once ``source`` has its result.

    A failed ``source`` fails it with the same error, or settles it with ``on_error(error)``
    when that is given; whatever ``settle`` or ``on_error`` raise fails it. Cancelling it
    cancels ``source``; a cancelled ``source`` cancels it. ``source``'s error is always read,
    so asyncio never logs it as unretrieved, even when nobody waits any more.
    """
    result: asyncio.Future[U] = source.get_loop().create_future()

    def done(finished: asyncio.Future[T]) -> None:
        if finished.cancelled():
            result.cancel()
            return
        error = finished.exception()
        if result.done():
            return
        try:
            if error is None:
                value = settle(finished.result())
            elif on_error is not None and isinstance(error, Exception):
                value = on_error(error)
            else:
                result.set_exception(error)
                return
        except Exception as exc:
            result.set_exception(exc)
            return
        result.set_result(value)

    def let_go(finished: asyncio.Future[U]) -> None:
        if finished.cancelled():
            source.cancel()

    source.add_done_callback(done)
    result.add_done_callback(let_go)
    return result
