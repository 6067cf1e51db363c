"""lazyconv._futures.chained: one future worked out from another, without a task."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from lazyconv._futures import chained


def run(coro):
    return asyncio.run(coro)


def test_the_result_is_worked_out_from_the_source() -> None:
    async def go():
        source = asyncio.get_running_loop().create_future()
        result = chained(source, lambda n: n * 2)
        source.set_result(21)
        return await result

    assert run(go()) == 42


def test_an_error_passes_on_unless_on_error_settles_it() -> None:
    async def go():
        loop = asyncio.get_running_loop()
        plain, handled = loop.create_future(), loop.create_future()
        failed = chained(plain, lambda n: n)
        settled = chained(handled, lambda n: n, on_error=lambda exc: f"settled: {exc}")
        plain.set_exception(ValueError("boom"))
        handled.set_exception(ValueError("bang"))
        with pytest.raises(ValueError, match="boom"):
            await failed
        return await settled

    assert run(go()) == "settled: bang"


def test_what_settle_raises_fails_the_result() -> None:
    async def go():
        source = asyncio.get_running_loop().create_future()
        result = chained(source, lambda n: 1 // n)
        source.set_result(0)
        await result

    with pytest.raises(ZeroDivisionError):
        run(go())


def test_cancelling_either_cancels_the_other() -> None:
    async def go():
        loop = asyncio.get_running_loop()
        first, second = loop.create_future(), loop.create_future()
        mine = chained(first, lambda n: n)
        theirs = chained(second, lambda n: n)
        mine.cancel()
        second.cancel()
        await asyncio.sleep(0)
        return first.cancelled(), theirs.cancelled()

    assert run(go()) == (True, True)


@pytest.mark.slow  # about 0.1-0.5 s: out of the quick look
def test_a_source_error_nobody_waits_for_is_never_logged_as_unretrieved(caplog) -> None:
    async def go():
        source = asyncio.get_running_loop().create_future()
        result = chained(source, lambda n: n)
        result.cancel()  # nobody waits any more ...
        await asyncio.sleep(0)
        # ... the source was cancelled with it; one failing later is read all the same
        other = asyncio.get_running_loop().create_future()
        late = chained(other, lambda n: n)
        late.set_result("answered already")
        other.set_exception(ValueError("late"))
        await asyncio.sleep(0)

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        run(go())
        gc.collect()
    assert "never retrieved" not in caplog.text
