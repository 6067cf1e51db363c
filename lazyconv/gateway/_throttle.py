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

Each answer is held for its own throttle time, from when it came. The connection is muted
until the latest end (:attr:`~lazyconv.net._session.Session.muted_until`: the connection loop
acts on none of its requests), but the answers it owes still go out as they come, as a broker
sends the answers of a channel it muted: a Produce answer owed before a held one waits for its
own throttle time only, never for a later request's. How long an answer was held is its
``throttled_s``, which the request's duration leaves out (Kafka's ``TotalTimeMs`` does not
count the throttle either, its ``ThrottleTimeMs`` does).

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
from lazyconv.net._session import Session
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
    """Until when one client's requests are held (the event loop's clock): each throttled
    answer of a held version pushes it to the end of its throttle time, and mutes ``session``
    (its connection loop acts on none of its requests) until then."""

    until: float = 0.0
    session: Session | None = None

    def throttled(self, throttle_ms: int) -> float:
        """An answer said ``throttle_ms``: hold it from now for that long (at most
        :data:`MAX_THROTTLE_HOLD_MS`), and the client's next requests at least as long.
        Returns when its hold ends."""
        end = asyncio.get_running_loop().time() + min(max(throttle_ms, 0),
                                                      MAX_THROTTLE_HOLD_MS) / 1000
        if end > self.until:
            self.until = end
            if self.session is not None:
                self.session.muted_until = max(self.session.muted_until, end)
        return end

    async def wait(self) -> None:
        """Until the hold is over (at once when there is none)."""
        left = self.until - asyncio.get_running_loop().time()
        if left > 0:
            await asyncio.sleep(left)

    async def hold(self, response: Response) -> Response:
        """``response`` once the throttle time it carries is over (closed if the wait is
        cancelled: the connection ends); its ``throttled_s`` says how long it was held."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        end = self.throttled(response.throttle_ms)
        try:
            await asyncio.sleep(max(0.0, end - started))
        except BaseException:
            response.close()
            raise
        response.throttled_s = loop.time() - started
        return response

    def hold_when_answered(self, answer: asyncio.Future[Response | None]) -> asyncio.Future[Response | None]:
        """A future of ``answer``'s response, once the throttle time it carries is over (a
        Deferred's: the connection loop meanwhile acts on none of the client's requests, but
        writes the answers before it as they come); its ``throttled_s`` says how long it was
        held. Cancelling it cancels ``answer``, or closes the response it holds; a failed
        ``answer`` fails it."""
        loop = answer.get_loop()
        result: asyncio.Future[Response | None] = loop.create_future()
        held: list[Response] = []  # the response while its timer runs
        timer: asyncio.TimerHandle | None = None

        def settle(response: Response | None, since: float | None = None) -> None:
            held.clear()
            if response is not None and since is not None:
                response.throttled_s = loop.time() - since
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
            held.append(response)
            # its own throttle time: an earlier request's answer never waits for a later one's
            timer = loop.call_at(self.throttled(response.throttle_ms), settle, response,
                                 loop.time())

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
