"""The LLM spend budget: ceilings on tokens and cost, reserved before each attempt."""

from __future__ import annotations

import asyncio

import pytest

from reliable import CallRecord, SpendBudget, SpendLimitError, reliable

from conftest import Clock, Sleeps


def test_a_minute_ceiling_refuses_what_does_not_fit_and_says_when(clock: Clock) -> None:
    spend = SpendBudget(price_in=3.0, price_out=15.0, minute_tokens=10_000, clock=clock)
    calls: list[str] = []

    @reliable(spend=spend, estimate=lambda prompt: (2_000, 4_000), usage=lambda r: (2_000, 500))
    def ask(prompt: str) -> str:
        calls.append(prompt)
        return "answer"

    assert ask("a") == "answer"
    assert spend.usage["minute"] == (2_500, pytest.approx(0.0135))  # $3/Mtok in, $15/Mtok out
    assert ask("b") == "answer"  # 2,500 + 6,000 reserved fits under 10,000
    clock.now = 1.0
    with pytest.raises(SpendLimitError) as info:
        ask("c")  # 5,000 used + 6,000 reserved does not
    assert info.value.reason == "minute-ceiling"
    assert info.value.retry_after is not None and 0 < info.value.retry_after <= 60
    assert calls == ["a", "b"]
    clock.now = 61.0
    assert ask("d") == "answer"  # the minute's usage has left the window


def test_a_refused_call_is_answered_like_an_open_breaker_and_not_retried(clock: Clock) -> None:
    spend = SpendBudget(minute_tokens=100, clock=clock)
    records: list[CallRecord] = []
    sleeps = Sleeps()

    @reliable(spend=spend, estimate=lambda: (50, 100), on_open=lambda: "cached",
              on_call=records.append, sleep=sleeps)
    def ask() -> str:
        raise AssertionError("not called")

    assert ask() == "cached"
    assert sleeps.waits == []
    assert records[0].outcome == "fallback"


def test_failed_attempts_are_charged_their_whole_estimate(clock: Clock) -> None:
    spend = SpendBudget(day_tokens=1_000_000, clock=clock)

    @reliable(spend=spend, estimate=lambda: (100, 900), max_attempts=3, sleep=lambda s: None)
    def flaky() -> str:
        raise ConnectionError("reset after the prompt was sent")

    with pytest.raises(ConnectionError):
        flaky()
    assert spend.usage["day"][0] == 3 * 1_000  # every retry costs tokens too


def test_a_cancelled_async_call_settles_its_reservation(clock: Clock) -> None:
    spend = SpendBudget(minute_tokens=1_500, clock=clock)

    @reliable(spend=spend, estimate=lambda: (500, 500), max_attempts=1)
    async def slow() -> str:
        await asyncio.sleep(10)
        return "late"

    async def main() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(slow(), 0.02)

    asyncio.run(main())
    assert spend.usage["minute"][0] == 1_000  # charged, not left reserved nor forgotten


def test_a_money_limit_opens_it(clock: Clock) -> None:
    spend = SpendBudget(month_cost=100.0, clock=clock)
    spend.money_limit(reset_after=30.0)
    assert spend.state == "open"

    @reliable(spend=spend, estimate=lambda: (1, 1))
    def ask() -> str:
        return "x"

    with pytest.raises(SpendLimitError, match="money-limit"):
        ask()
    clock.now = 31.0
    assert ask() == "x"


@pytest.mark.parametrize(
    "kwargs,param",
    [
        ({"minute_tokens": -1}, "minute_tokens"),
        ({"day_cost": float("nan")}, "day_cost"),
        ({"price_in": -3.0}, "price_in"),
        ({"throttle_below": 1.0}, "throttle_below"),
        ({"month_tokens": "many"}, "month_tokens"),
    ],
)
def test_bad_spend_arguments_are_named(kwargs: dict[str, object], param: str) -> None:
    with pytest.raises((ValueError, TypeError), match=param):
        SpendBudget(**kwargs)  # type: ignore[arg-type]


def test_a_spend_budget_needs_an_estimate() -> None:
    with pytest.raises(TypeError, match="estimate"):
        reliable(spend=SpendBudget(minute_tokens=10))
