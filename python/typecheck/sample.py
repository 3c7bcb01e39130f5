"""A user's program, checked with `mypy --strict` against the installed wheel's stubs."""

from __future__ import annotations

import asyncio
import random

import reliable as reliable_mod
from reliable import (
    CallRecord,
    CircuitBreaker,
    CircuitOpenError,
    RetryBudget,
    SpendBudget,
    SpendLimitError,
    exp_backoff,
    fallback,
    reliable,
)

breaker = CircuitBreaker(failure_rate=0.5, window=20, cooldown=30.0, probe=3)
budget = RetryBudget(0.1, min_per_sec=5)


def cache_fallback() -> str:
    return "cached"


def log(record: CallRecord) -> None:
    print(record.function, record.attempts, record.outcome)


@reliable(
    breaker=breaker,
    timeout=8.0,
    max_attempts=5,
    base_delay=0.2,
    jitter=0.1,
    on_open=lambda *a, **k: cache_fallback(),
    budget=budget,
    on_call=log,
)
def call_llm(prompt: str) -> str:
    return prompt.upper()


@reliable
def bare(n: int) -> int:
    return n + 1


@reliable(max_attempts=2)
async def acall(prompt: str) -> str:
    return prompt


async def main() -> str:
    served = await fallback(acall, acall)("hi")
    text: str = await acall("x")
    return f"{served.served_by}: {text}"


def use() -> None:
    upper: str = call_llm("hi")
    n: int = bare(1)
    wait: float = exp_backoff(2, 0.2, 2.0, 0.1)
    state: str = breaker.state
    try:
        call_llm("again")
    except CircuitOpenError as exc:
        print(exc.retry_after)
    print(upper, n, wait, state, asyncio.run(main()))


spend = SpendBudget(price_in=3.0, price_out=15.0, day_cost=20.0)


@reliable(spend=spend, estimate=lambda prompt: (len(prompt), 1_000), usage=lambda r: (10, len(r)))
def priced(prompt: str) -> str:
    return prompt


def spent() -> float:
    try:
        priced("hi")
    except SpendLimitError as exc:
        print(exc.reason)
    day: tuple[int, float] = spend.usage["day"]
    return day[1]


# A policy file, and what a call through it may raise.
policy = reliable_mod.Policy.from_json(
    '{"name": "p", "stack": {"Call": {"downstream": "api"}}}', clock=lambda: 0.0, rng=random.Random(1)
)
through_policy = reliable_mod.reliable(lambda: 1, policy=policy, on_event=lambda name, fields: None)
one: int = through_policy()
refused: reliable_mod.CircuitOpenError = reliable_mod.RefusedError("limiter", None)

# Chaos: the strategies as dicts, switched at run time; a scenario's fault timeline.
chaos = reliable_mod.Chaos(fault={"rate": 0.1, "seed": 7, "status": 503, "retry_after": 1.5})
chaos.set_enabled("fault", False)
on: list[str] = chaos.enabled
reliable_mod.Chaos.kill_all(False)
chaotic = reliable_mod.reliable(lambda: 1, chaos=chaos, max_attempts=2)
two: int = chaotic()
timeline = reliable_mod.ChaosTimeline.from_scenario("Scenario(faults: [])", "api", seed=1)
kinds: list[tuple[str, float, float]] = timeline.faults
injected: reliable_mod.ChaosResponse = reliable_mod.ChaosError(reliable_mod.ChaosResponse(503, {})).response

# Work no timer can stop: each attempt in the caller's thread, a late success kept.
blocking = reliable_mod.reliable(lambda: "done", timeout=2.0, uninterruptible=True)
late: str = blocking()
