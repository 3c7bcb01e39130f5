"""Bad arguments: a ValueError or TypeError naming the parameter; never a Rust panic."""

from __future__ import annotations

import itertools
import math

import pytest

import reliable as rk
from reliable import CircuitBreaker, RetryBudget, exp_backoff, reliable

HOSTILE: list[object] = [
    -1, 0, 1, 2, 10**30, -(10**30), 0.5, -0.5, 1.5, 1e300, -1e300, math.nan, math.inf, -math.inf,
    True, "3", None, [], object(), 2**63, 2**64,
]

BREAKER_PARAMS = ["failure_rate", "window", "cooldown", "probe", "minimum_calls", "probe_limit",
                  "probe_timeout", "cooldown_growth", "cooldown_max", "cooldown_jitter"]
RELIABLE_PARAMS = ["timeout", "max_attempts", "base_delay", "factor", "jitter", "max_delay",
                   "retry_after_cap"]


def fails_cleanly(param: str, build: object) -> None:
    try:
        build()  # type: ignore[operator]
    except (ValueError, TypeError) as exc:
        assert param in str(exc), f"{type(exc).__name__} does not name {param}: {exc}"
    # Anything else (a PanicException is a BaseException) fails the test.


@pytest.mark.parametrize("param,value", list(itertools.product(BREAKER_PARAMS, HOSTILE)))
def test_circuit_breaker_arguments(param: str, value: object) -> None:
    fails_cleanly(param, lambda: CircuitBreaker(**{param: value}))


@pytest.mark.parametrize("param,value", list(itertools.product(RELIABLE_PARAMS, HOSTILE)))
def test_reliable_arguments(param: str, value: object) -> None:
    fails_cleanly(param, lambda: reliable(**{param: value})(lambda: None))


@pytest.mark.parametrize("param,value", list(itertools.product(["attempt", "base", "factor", "jitter"], HOSTILE)))
def test_exp_backoff_arguments(param: str, value: object) -> None:
    kwargs: dict[str, object] = {"attempt": 1, param: value}
    fails_cleanly(param, lambda: exp_backoff(**kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize("param,value", list(itertools.product(["ratio", "min_per_sec", "ttl"], HOSTILE)))
def test_retry_budget_arguments(param: str, value: object) -> None:
    fails_cleanly(param, lambda: RetryBudget(**{param: value}))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "build,param",
    [
        (lambda: CircuitBreaker(failure_rate=0), "failure_rate"),
        (lambda: CircuitBreaker(failure_rate=1.5), "failure_rate"),
        (lambda: CircuitBreaker(window=0), "window"),
        (lambda: CircuitBreaker(window="20"), "window"),
        (lambda: CircuitBreaker(window=20, minimum_calls=21), "minimum_calls"),
        (lambda: CircuitBreaker(cooldown=-1), "cooldown"),
        (lambda: CircuitBreaker(probe=0), "probe"),
        (lambda: CircuitBreaker(clock=3), "clock"),
        (lambda: CircuitBreaker(rng="x"), "rng"),
        (lambda: CircuitBreaker(cooldown_growth=2.0), "cooldown_max"),
        (lambda: CircuitBreaker(cooldown_growth=2.0, cooldown_max=10.0, cooldown=20.0), "cooldown_max"),
        (lambda: reliable(max_attempts=0), "max_attempts"),
        (lambda: reliable(max_attempts=2.5), "max_attempts"),
        (lambda: reliable(timeout=0), "timeout"),
        (lambda: reliable(jitter=1.5), "jitter"),
        (lambda: reliable(factor=0.5), "factor"),
        (lambda: reliable(sleep=1), "sleep"),
        (lambda: reliable(on_open="x"), "on_open"),
        (lambda: reliable(breaker="b"), "breaker"),
        (lambda: reliable(budget=3), "budget"),
        (lambda: reliable(rng=1), "rng"),
        (lambda: reliable(3), "fn"),
        (lambda: exp_backoff(0), "attempt"),
        (lambda: RetryBudget.token_bucket(0), "max_tokens"),
        (lambda: RetryBudget.token_bucket(10, retry_cost=-1), "retry_cost"),
        (lambda: RetryBudget.token_bucket(10, retry_above=20), "retry_above"),
        (lambda: rk.fallback(), "layers"),
    ],
)
def test_each_bad_argument_is_named(build: object, param: str) -> None:
    with pytest.raises((ValueError, TypeError), match=param):
        build()  # type: ignore[operator]


def test_a_clock_or_rng_that_misbehaves_is_named() -> None:
    b = CircuitBreaker(clock=lambda: "soon")
    with pytest.raises(TypeError, match="clock"):
        b.state
    b = CircuitBreaker(clock=lambda: -5.0)
    with pytest.raises(ValueError, match="clock"):
        b.state
    f = reliable(lambda: 1 / 0, rng=lambda: 7.0, max_attempts=2, sleep=lambda s: None)
    with pytest.raises(ValueError, match="rng"):
        f()
