"""A layer's ``scope`` decides what the functions decorated with one ``Policy`` share, as it
decides what the services a Rust tower layer wraps share (``reliable/src/policy/mod.rs``) and the
wrappers made with one npm ``Policy``: a ``Shared`` layer is one state for every function
decorated with the ``Policy``, a ``PerClient`` layer (the default) one per decorated function.
The seed's arguments (no policy file) are unchanged: a breaker or budget object given to several
functions is shared by them."""

from __future__ import annotations

import json
import threading
from typing import Any, Callable

import pytest

from reliable import CircuitBreaker, CircuitOpenError, Policy, RefusedError, RetryBudget, reliable

SCOPES = ["Shared", "PerClient", None]  # None: the field left out (PerClient, the default)


def call() -> dict[str, Any]:
    return {"Call": {"downstream": "api", "timeout": None}}


def scoped(body: dict[str, Any], scope: str | None, field: str = "scope") -> dict[str, Any]:
    return body if scope is None else {**body, field: scope}


def entry(layer: dict[str, Any]) -> str:
    return json.dumps({"name": "t", "stack": layer})


def breaker(scope: str | None, inner: dict[str, Any] | None = None, failures: int = 2) -> dict[str, Any]:
    body = {"config": {"consecutive_failures": failures, "open": {"duration": "30s"}},
            "inner": inner or call()}
    return {"Breaker": scoped(body, scope)}


def retry(inner: dict[str, Any], scope: str | None, attempts: int = 3) -> dict[str, Any]:
    """A retry of ``attempts`` attempts whose budget holds two retries, never refilled."""
    budget = {"TokenBucket": {
        "max_tokens": 2.0, "initial_tokens": None, "first_try_credit": 0.0,
        "success_credit": 0.0, "retried_success_credit": None, "failure_cost": 0.0,
        "retry_cost": 1.0, "retry_when": {"AtLeast": 1.0},
    }}
    policy = {"max_attempts": attempts, "backoff": {"shape": {"Constant": {"delay": "1ms"}}}}
    body = {"policy": policy, "budget": budget, "inner": inner}
    return {"Retry": scoped(body, scope, "budget_scope")}


def limit(scope: str | None, inner: dict[str, Any] | None = None) -> dict[str, Any]:
    body = {"config": {"rule": "Fixed", "initial": 1, "min": 1, "max": 1}, "inner": inner or call()}
    return {"Limit": scoped(body, scope)}


class Downstream:
    """A function that fails (``ConnectionError``) or answers, counting its attempts."""

    def __init__(self, fails: bool = True) -> None:
        self.fails = fails
        self.attempts = 0

    def __call__(self) -> str:
        self.attempts += 1
        if self.fails:
            raise ConnectionError("down")
        return "ok"


def failing(f: Callable[[], Any], times: int) -> None:
    for _ in range(times):
        with pytest.raises(ConnectionError):
            f()


# --- the breaker -----------------------------------------------------------------------------


def test_a_shared_breaker_one_function_opens_refuses_the_other(clock: Any) -> None:
    policy = Policy.from_json(entry(breaker("Shared")), clock=clock)
    a, b = Downstream(), Downstream(fails=False)
    fa, fb = reliable(a, policy=policy), reliable(b, policy=policy)
    failing(fa, 2)
    with pytest.raises(CircuitOpenError):
        fb()
    assert b.attempts == 0, "refused before the call: the breaker is one for both"
    assert policy.breaker is not None and policy.breaker.state == "open"


@pytest.mark.parametrize("scope", ["PerClient", None])
def test_a_per_client_breaker_is_each_functions_own(clock: Any, scope: str | None) -> None:
    policy = Policy.from_json(entry(breaker(scope)), clock=clock)
    a, b = Downstream(), Downstream(fails=False)
    fa, fb = reliable(a, policy=policy), reliable(b, policy=policy)
    failing(fa, 2)
    with pytest.raises(CircuitOpenError):
        fa()
    assert a.attempts == 2
    assert fb() == "ok" and b.attempts == 1, "the other function's breaker is still closed"
    # The Policy holds no breaker of its own: each decorated function has one.
    assert policy.breaker is None
    assert fb.__served_by__.startswith("retry(breaker(")  # type: ignore[attr-defined]


def test_one_decorator_applied_to_two_functions_makes_two_clients(clock: Any) -> None:
    deco = reliable(policy=Policy.from_json(entry(breaker("PerClient")), clock=clock))
    a, b = Downstream(), Downstream(fails=False)
    fa, fb = deco(a), deco(b)
    failing(fa, 2)
    assert fb() == "ok"


# --- the retry budget ------------------------------------------------------------------------


def test_a_shared_budget_spent_by_one_function_refuses_the_others_retries() -> None:
    policy = Policy.from_json(entry(retry(call(), "Shared")))
    a, b = Downstream(), Downstream()
    failing(reliable(a, policy=policy), 1)
    assert a.attempts == 3  # two retries: the budget's two tokens
    failing(reliable(b, policy=policy), 1)
    assert b.attempts == 1, "the budget is one for both: spent"


@pytest.mark.parametrize("scope", ["PerClient", None])
def test_a_per_client_budget_is_each_functions_own(scope: str | None) -> None:
    policy = Policy.from_json(entry(retry(call(), scope)))
    a, b = Downstream(), Downstream()
    fa = reliable(a, policy=policy)
    failing(fa, 2)
    assert a.attempts == 3 + 1  # its own budget spent by its first call
    failing(reliable(b, policy=policy), 1)
    assert b.attempts == 3, "the other function's budget is full"


# --- the limit -------------------------------------------------------------------------------


def holding(f: Callable[[], Any], inside: threading.Event, leave: threading.Event,
            check: Callable[[], None]) -> None:
    """Runs ``f`` in a thread until it is inside its call, runs ``check``, then lets it end."""
    results: list[Any] = []
    t = threading.Thread(target=lambda: results.append(f()))
    t.start()
    try:
        assert inside.wait(5)
        check()
    finally:
        leave.set()
        t.join(5)
    assert results == ["done"]


def blocking(inside: threading.Event, leave: threading.Event) -> Callable[[], str]:
    def work() -> str:
        inside.set()
        leave.wait(5)
        return "done"

    return work


def test_a_shared_limit_in_use_by_one_function_refuses_the_other() -> None:
    policy = Policy.from_json(entry(limit("Shared")))
    inside, leave = threading.Event(), threading.Event()
    other = Downstream(fails=False)

    def check() -> None:
        with pytest.raises(RefusedError) as e:
            reliable(other, policy=policy)()
        assert e.value.by == "limiter" and other.attempts == 0

    holding(reliable(blocking(inside, leave), policy=policy), inside, leave, check)


@pytest.mark.parametrize("scope", ["PerClient", None])
def test_a_per_client_limit_is_each_functions_own(scope: str | None) -> None:
    policy = Policy.from_json(entry(limit(scope)))
    inside, leave = threading.Event(), threading.Event()
    held = reliable(blocking(inside, leave), policy=policy)
    other = Downstream(fails=False)

    def check() -> None:
        assert reliable(other, policy=policy)() == "ok"
        # The function in its call still holds its own only slot: a second call of it is refused.
        with pytest.raises(RefusedError):
            held()

    holding(held, inside, leave, check)


@pytest.mark.parametrize("scope", SCOPES)
def test_a_rate_limit_follows_its_scope(scope: str | None, clock: Any) -> None:
    rate = {"RateLimit": scoped({"config": {"rate": 1, "period": "10s", "burst": 1},
                                 "inner": call()}, scope)}
    policy = Policy.from_json(entry(rate), clock=clock)
    fa = reliable(Downstream(fails=False), policy=policy)
    fb = reliable(Downstream(fails=False), policy=policy)
    assert fa() == "ok"
    if scope == "Shared":
        with pytest.raises(RefusedError):
            fb()
    else:
        assert fb() == "ok"
    with pytest.raises(RefusedError):
        fa()  # its own token, or the shared one, is spent either way


# --- a mixed stack ---------------------------------------------------------------------------


def test_a_mixed_stack_shares_only_its_shared_layers(clock: Any) -> None:
    """``Retry`` (its budget ``PerClient``) around a ``Shared`` breaker around a ``PerClient``
    limit: one function's call in flight and its spent budget are its own, but the failures of
    all of them count in one breaker, which opens for all."""
    layer = retry(breaker("Shared", limit("PerClient"), failures=5), "PerClient")
    policy = Policy.from_json(entry(layer), clock=clock)
    ok = Downstream(fails=False)
    fo = reliable(ok, policy=policy)

    # The limit: one function in its call leaves the other's only slot free.
    inside, leave = threading.Event(), threading.Event()
    held = reliable(blocking(inside, leave), policy=policy)
    holding(held, inside, leave, lambda: None if fo() == "ok" else pytest.fail("refused"))

    # The budget: a's calls spend a's two retries; b's are still there.
    a, b = Downstream(), Downstream()
    fa, fb = reliable(a, policy=policy), reliable(b, policy=policy)
    failing(fa, 1)
    assert a.attempts == 3  # 3 failures in a row
    assert fo() == "ok"  # 0 in a row
    failing(fa, 1)
    assert a.attempts == 4, "a's budget is spent"  # 1 in a row
    failing(fb, 1)
    assert b.attempts == 3, "b's budget is its own"  # 4 in a row

    # The breaker: a's next failure is the fifth in a row: open for every function.
    with pytest.raises((ConnectionError, CircuitOpenError)):
        fa()
    assert a.attempts == 5
    assert policy.breaker is not None and policy.breaker.state == "open"
    with pytest.raises(CircuitOpenError):
        fb()
    with pytest.raises(CircuitOpenError):
        fo()
    assert b.attempts == 3 and ok.attempts == 2


# --- the seed's arguments: unchanged ---------------------------------------------------------


def test_the_seed_arguments_share_what_objects_are_given(clock: Any) -> None:
    breaker = CircuitBreaker(failure_rate=1.0, window=2, cooldown=30, clock=clock, minimum_calls=2)
    budget = RetryBudget.token_bucket(2, retry_cost=1, failure_cost=0, success_credit=0)
    a, b, c = Downstream(), Downstream(), Downstream(fails=False)
    fa = reliable(a, budget=budget, max_attempts=3, base_delay=0, clock=clock, sleep=lambda s: None)
    fb = reliable(b, budget=budget, max_attempts=3, base_delay=0, clock=clock, sleep=lambda s: None)
    failing(fa, 1)
    failing(fb, 1)
    assert (a.attempts, b.attempts) == (3, 1), "one budget, spent by a"
    fc = reliable(c, breaker=breaker, max_attempts=1, clock=clock)
    fd = reliable(Downstream(), breaker=breaker, max_attempts=1, clock=clock)
    failing(fd, 2)
    with pytest.raises(CircuitOpenError):
        fc()
    assert c.attempts == 0 and breaker.state == "open"


def test_a_policy_from_a_file_runs_only_through_its_clients() -> None:
    policy = Policy.from_json(entry(breaker("PerClient")))
    with pytest.raises(TypeError, match="decorated with it"):
        policy.start()
    client = policy._client()
    assert client._client() is client, "a client is its own client"
    assert client.breaker is not None and policy.breaker is None
