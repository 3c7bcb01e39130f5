"""async def functions: decorated the same way, with true cancellation."""

from __future__ import annotations

import asyncio
import sys

import pytest

from reliable import CircuitBreaker, CircuitOpenError, reliable

from conftest import Clock


def test_an_async_function_is_retried_with_an_awaited_sleep() -> None:
    waits: list[float] = []

    async def fake_sleep(s: float) -> None:
        waits.append(s)

    attempts = 0

    @reliable(max_attempts=3, jitter=0.0, sleep=fake_sleep)
    async def flaky() -> str:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise ConnectionError("reset")
        return "ok"

    assert asyncio.run(flaky()) == "ok"
    assert waits == [0.2, 0.4]


def test_a_timed_out_attempt_is_cancelled_not_abandoned() -> None:
    cancelled = 0
    attempts = 0

    @reliable(timeout=0.05, max_attempts=2, base_delay=0.001, jitter=0.0)
    async def hangs() -> None:
        nonlocal cancelled, attempts
        attempts += 1
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled += 1
            raise

    async def main() -> tuple[int, int]:
        with pytest.raises((TimeoutError, asyncio.TimeoutError)):
            await hangs()
        # Read inside the loop: asyncio.run would cancel leftover tasks when it closes, which
        # must not count as the decorator's cancellation.
        return attempts, cancelled

    assert asyncio.run(main()) == (2, 2)


def probe_breaker(clock: Clock) -> CircuitBreaker:
    """Open after one failure; one probe at a time once 10 s are up."""
    b = CircuitBreaker(failure_rate=1.0, window=1, cooldown=10.0, probe=1, clock=clock,
                       probe_limit=1, probe_timeout=1000.0)
    b._record(b._acquire(), "failure")
    clock.now = 10.0
    assert b.state == "half_open"
    return b


def test_a_cancelled_half_open_probe_hands_its_permit_back(clock: Clock) -> None:
    breaker = probe_breaker(clock)

    @reliable(breaker=breaker, max_attempts=1)
    async def slow() -> str:
        await asyncio.sleep(10)
        return "late"

    @reliable(breaker=breaker, max_attempts=1)
    async def fast() -> str:
        return "ok"

    async def main() -> str:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(slow(), 0.02)  # the caller gives up: the probe is cancelled
        assert breaker.stats["probes_in_flight"] == 0
        return await fast()  # the slot is free again: the next call is the probe

    assert asyncio.run(main()) == "ok"
    assert breaker.state == "closed"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.TaskGroup is new in 3.11")
def test_taskgroup_cancellation_frees_the_probe(clock: Clock) -> None:
    breaker = probe_breaker(clock)

    @reliable(breaker=breaker, max_attempts=1)
    async def slow() -> str:
        await asyncio.sleep(10)
        return "late"

    async def boom() -> None:
        await asyncio.sleep(0.01)
        raise RuntimeError("sibling failed")

    async def main() -> None:
        async with asyncio.TaskGroup() as tg:  # type: ignore[attr-defined]
            tg.create_task(slow())
            tg.create_task(boom())

    with pytest.raises(BaseException):
        asyncio.run(main())
    assert breaker.stats["probes_in_flight"] == 0
    assert breaker._acquire() is not None


def test_without_the_hand_back_a_cancelled_probe_would_wedge_the_breaker(clock: Clock) -> None:
    """The control: a permit that is never returned keeps the only probe slot (until its lease,
    1000 s here), so every other call is refused."""
    breaker = probe_breaker(clock)
    held = breaker._acquire()
    assert held is not None and not isinstance(held, float)
    assert breaker._acquire() is None
    breaker._record(held, "ignored")
    assert breaker._acquire() is not None


def test_open_breaker_raises_or_awaits_on_open(clock: Clock) -> None:
    breaker = CircuitBreaker(failure_rate=1.0, window=1, cooldown=10.0, probe=1, clock=clock)
    breaker._record(breaker._acquire(), "failure")

    async def cached(*a: object) -> str:
        return "cached"

    @reliable(breaker=breaker, max_attempts=1)
    async def plain() -> str:
        return "x"

    @reliable(breaker=breaker, max_attempts=1, on_open=cached)
    async def with_fallback() -> str:
        return "x"

    with pytest.raises(CircuitOpenError):
        asyncio.run(plain())
    assert asyncio.run(with_fallback()) == "cached"
