"""Every transition of the seed's state diagram, under an injected clock.

            failure rate >= threshold
   CLOSED ──────────────────────────► OPEN
      ▲                                 │
      │ `probe` successes in a row      │ cooldown over
      │                                 ▼
      └──────────────────────────── HALF_OPEN
                 any failure ──► back to OPEN (cooldown restarts)
"""

from __future__ import annotations

import pytest

from reliable import CircuitBreaker, CircuitOpenError, reliable

from conftest import Clock


class Boom(Exception):
    pass


def make(clock: Clock, **kw: object) -> tuple[CircuitBreaker, object, list[str]]:
    """A breaker (50% over 4 calls, 10 s cooldown, 2 probes) and a one-attempt function whose
    next answers the test scripts."""
    breaker = CircuitBreaker(failure_rate=0.5, window=4, cooldown=10.0, probe=2, clock=clock, **kw)
    script: list[str] = []

    @reliable(breaker=breaker, max_attempts=1)
    def call() -> str:
        if script.pop(0) == "fail":
            raise Boom()
        return "ok"

    return breaker, call, script


def run(call: object, script: list[str], answers: list[str]) -> None:
    for a in answers:
        script.append(a)
        try:
            call()  # type: ignore[operator]
        except Boom:
            pass


def test_closed_to_open_when_the_window_failure_rate_reaches_the_threshold(clock: Clock) -> None:
    breaker, call, script = make(clock)
    run(call, script, ["ok", "ok", "fail"])
    assert breaker.state == "closed"  # the window is not full yet: 1 of 3
    run(call, script, ["fail"])  # 2 of 4 = 50%: inclusive threshold
    assert breaker.state == "open"
    assert breaker.stats["failures"] == 2


def test_closed_stays_closed_below_the_threshold(clock: Clock) -> None:
    breaker, call, script = make(clock)
    run(call, script, ["ok", "ok", "ok", "fail", "ok", "ok", "ok", "fail", "ok"])
    assert breaker.state == "closed"
    assert breaker.stats["calls"] == 4  # a sliding window of the last 4 calls


def test_open_rejects_without_calling_and_says_how_long(clock: Clock) -> None:
    breaker, call, script = make(clock)
    clock.now = 100.0
    run(call, script, ["fail", "fail", "fail", "fail"])
    assert breaker.state == "open"
    clock.now = 103.5
    with pytest.raises(CircuitOpenError) as info:
        call()  # type: ignore[operator]
    assert info.value.retry_after == pytest.approx(6.5)
    assert script == []  # nothing consumed: the function was not called


def test_open_answers_with_on_open_while_open(clock: Clock) -> None:
    breaker = CircuitBreaker(failure_rate=1.0, window=1, cooldown=10.0, probe=1, clock=clock)
    calls: list[str] = []

    @reliable(breaker=breaker, max_attempts=1, on_open=lambda *a, **k: f"cached {a[0]}")
    def ask(prompt: str) -> str:
        calls.append(prompt)
        raise Boom()

    with pytest.raises(Boom):
        ask("a")
    assert breaker.state == "open"
    assert ask("b") == "cached b"
    assert calls == ["a"]


def test_open_to_half_open_when_the_cooldown_is_over(clock: Clock) -> None:
    breaker, call, script = make(clock)
    run(call, script, ["fail"] * 4)
    clock.now = 9.999
    assert breaker.state == "open"
    clock.now = 10.0
    assert breaker.state == "half_open"


def test_half_open_failure_reopens_and_restarts_the_cooldown(clock: Clock) -> None:
    breaker, call, script = make(clock)
    run(call, script, ["fail"] * 4)
    clock.now = 12.0
    run(call, script, ["ok", "fail"])  # one success, then a failed probe
    assert breaker.state == "open"
    clock.now = 21.9
    assert breaker.state == "open"  # 10 s from the failure at 12 s, not from the first trip
    clock.now = 22.0
    assert breaker.state == "half_open"


def test_half_open_closes_after_probe_successes_in_a_row_and_clears_the_window(clock: Clock) -> None:
    breaker, call, script = make(clock)
    run(call, script, ["fail"] * 4)
    clock.now = 10.0
    run(call, script, ["ok"])
    assert breaker.state == "half_open"  # 1 of 2
    run(call, script, ["ok"])
    assert breaker.state == "closed"
    assert breaker.stats["calls"] == 0 and breaker.stats["failures"] == 0
    run(call, script, ["fail"])  # an old failure does not count again
    assert breaker.state == "closed"


def test_half_open_admits_every_call_as_a_probe_like_the_seed(clock: Clock) -> None:
    breaker, _, _ = make(clock)
    for _ in range(4):
        t = breaker._acquire()
        breaker._record(t, "failure")
    clock.now = 10.0
    tickets = [breaker._acquire() for _ in range(3)]
    assert all(not isinstance(t, float) for t in tickets)  # no gate: three probes at once
    for t in tickets:
        breaker._record(t, "ignored")


def test_a_probe_limit_gates_half_open_when_asked(clock: Clock) -> None:
    breaker, _, _ = make(clock, probe_limit=1, probe_timeout=5.0)
    for _ in range(4):
        breaker._record(breaker._acquire(), "failure")
    clock.now = 10.0
    probe = breaker._acquire()
    assert not isinstance(probe, float)
    assert breaker._acquire() is None  # the only slot is taken: rejected, time unknown
    clock.now = 15.0  # the lease expired: the next call counts it as a failed probe
    assert breaker._acquire() == 10.0
    assert breaker.state == "open"
    breaker._record(probe, "success")  # the late answer changes nothing
    assert breaker.state == "open"


def test_on_transition_reports_each_change(clock: Clock) -> None:
    seen: list[tuple[str, str, float]] = []
    breaker = CircuitBreaker(
        failure_rate=1.0, window=1, cooldown=5.0, probe=1, clock=clock,
        on_transition=lambda a, b, at: seen.append((a, b, at)),
    )
    breaker._record(breaker._acquire(), "failure")
    clock.now = 5.0
    breaker._record(breaker._acquire(), "success")
    assert seen == [("closed", "open", 0.0), ("open", "half_open", 5.0), ("half_open", "closed", 5.0)]


def test_a_hook_that_raises_does_not_lose_the_transition(clock: Clock) -> None:
    import sys

    seen: list[object] = []
    old = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(u.exc_value)
    try:
        def hook(a: str, b: str, at: float) -> None:
            raise RuntimeError("exporter down")

        breaker = CircuitBreaker(failure_rate=1.0, window=1, cooldown=5.0, probe=1, clock=clock,
                                 on_transition=hook)
        breaker._record(breaker._acquire(), "failure")
    finally:
        sys.unraisablehook = old
    assert breaker.state == "open"
    assert len(seen) == 1 and isinstance(seen[0], RuntimeError)
