"""A cluster's quota throttle for the clients that do not back off themselves (KIP-219).

Since Kafka 2.0 a broker over a client's quota answers at once with the throttle time and the
client waits that long before its next request to the broker — from the version of each API
that KIP-219 bumped (Fetch v8, Produce v6, Metadata v6, ...: Kafka's
``AbstractResponse.shouldClientThrottle``, declared with each API as
:attr:`~lazyconv.protocol.ApiSpec.first_client_throttled`). Before those versions the broker
held the answer for the throttle time and the client, relying on that, never waits itself.
The gateway asks the cluster at new versions, so the cluster answers at once and expects the
gateway to wait; a client of an older version behind the gateway would get the answer at once
and ask again at once, never slowed down. For such a client the gateway does what the broker did: it holds the
answer for the throttle time it carries (at most :data:`MAX_THROTTLE_HOLD_MS`) and acts on none
of that client's later requests meanwhile — only that client's connection waits, on a timer of
the event loop. A client of a KIP-219 version gets its answer at once, the throttle time in it,
as from the cluster.

The APIs whose every version is client-throttled, and those whose client never backs off at any
version (the newer ones Kafka never bumped: DescribeCluster, ConsumerGroupHeartbeat, ...), are
passed on at once: a broker never held their answers either, it mutes the throttled connection,
which is then this client's own connection upstream.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from lazyconv.net._model import Response
from lazyconv.protocol import KAFKA_API_BY_KEY

__all__ = ["MAX_THROTTLE_HOLD_MS", "ThrottleHold", "holds_throttled_answers", "throttle_of"]

#: The longest an answer is held: a quota's throttle time is bounded by its window (a request
#: quota's by ``quota.window.size.seconds``, 1 s; a bandwidth quota's a few windows), and a
#: held answer must come well within the old clients' request timeouts (30 s and more), or they
#: would take it for lost and connect again.
MAX_THROTTLE_HOLD_MS = 10_000

def holds_throttled_answers(api_key: int, version: int) -> bool:
    """Whether a throttled answer to ``version`` of ``api_key`` is held by the broker (the
    client predates KIP-219 there and does not back off itself): the declaration's
    :attr:`~lazyconv.protocol.ApiSpec.first_client_throttled`; no version of an API lazyconv
    does not declare."""
    spec = KAFKA_API_BY_KEY.get(api_key)
    return spec is not None and spec.holds_throttled_answers(version)


def throttle_of(body: dict[str, Any]) -> int:
    """The throttle time (ms) an answer's body carries; 0 where it has none."""
    throttle = body.get("throttle_time_ms", 0)
    return throttle if isinstance(throttle, int) and throttle > 0 else 0


@dataclass
class ThrottleHold:
    """Until when one client's answers are held (the event loop's clock): each throttled answer
    of a held version pushes it to the end of its throttle time."""

    until: float = 0.0

    def throttled(self, throttle_ms: int) -> None:
        """An answer said ``throttle_ms``: hold from now for that long (at most
        :data:`MAX_THROTTLE_HOLD_MS`)."""
        if throttle_ms > 0:
            end = asyncio.get_running_loop().time() + min(throttle_ms, MAX_THROTTLE_HOLD_MS) / 1000
            self.until = max(self.until, end)

    async def wait(self) -> None:
        """Until the hold is over (at once when there is none)."""
        left = self.until - asyncio.get_running_loop().time()
        if left > 0:
            await asyncio.sleep(left)

    async def hold(self, response: Response) -> Response:
        """``response`` once the throttle time it carries is over (closed if the wait is
        cancelled: the connection ends)."""
        self.throttled(response.throttle_ms)
        try:
            await self.wait()
        except BaseException:
            response.close()
            raise
        return response

    def hold_when_answered(self, answer: asyncio.Future[Response | None]) -> asyncio.Future[Response | None]:
        """A future of ``answer``'s response, once the throttle time it carries is over (a
        Deferred's: the connection loop meanwhile acts on none of the client's requests, as
        :meth:`wait` holds them). Cancelling it cancels ``answer``, or closes the response it
        holds; a failed ``answer`` fails it."""
        loop = answer.get_loop()
        result: asyncio.Future[Response | None] = loop.create_future()
        held: list[Response] = []  # the response while its timer runs
        timer: asyncio.TimerHandle | None = None

        def settle(response: Response | None) -> None:
            held.clear()
            if result.done():  # let go meanwhile
                if response is not None:
                    response.close()
            else:
                result.set_result(response)

        def done(finished: asyncio.Future[Response | None]) -> None:
            nonlocal timer
            if finished.cancelled():
                result.cancel()
                return
            error = finished.exception()
            if error is not None:
                if not result.done():
                    result.set_exception(error)
                return
            response = finished.result()
            if response is None or response.throttle_ms <= 0 or result.done():
                settle(response)
                return
            self.throttled(response.throttle_ms)
            held.append(response)
            timer = loop.call_at(self.until, settle, response)

        def let_go(finished: asyncio.Future[Response | None]) -> None:
            if not finished.cancelled():
                return
            answer.cancel()
            if timer is not None:
                timer.cancel()
            for response in held:
                response.close()
            held.clear()

        answer.add_done_callback(done)
        result.add_done_callback(let_go)
        return result
