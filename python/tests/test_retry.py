"""Retries: the core's backoff, jitter, Retry-After, budgets and the metrics hook."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from reliable import CallRecord, CircuitBreaker, RetryBudget, exp_backoff, reliable, retry_after_of

from conftest import Clock, Sleeps


def failing(n: int, exc: Exception | None = None) -> tuple[list[int], object]:
    """A function that fails its first n calls."""
    calls: list[int] = []

    def f() -> str:
        calls.append(1)
        if len(calls) <= n:
            raise exc if exc is not None else ConnectionError("reset")
        return "ok"

    return calls, f


def test_exp_backoff_is_base_times_factor_to_the_attempt_spread_by_jitter() -> None:
    assert [exp_backoff(a, 0.2, 2.0, 0.0) for a in (1, 2, 3, 4)] == [0.2, 0.4, 0.8, 1.6]
    assert exp_backoff(3, 0.2, 2.0, 0.1, rng=lambda: 0.0) == pytest.approx(0.72)
    assert exp_backoff(3, 0.2, 2.0, 0.1, rng=lambda: 1.0) == pytest.approx(0.88)
    for _ in range(200):
        assert 0.72 <= exp_backoff(3) <= 0.88


def test_retries_wait_the_core_backoff_and_give_up_after_max_attempts(sleeps: Sleeps) -> None:
    calls, f = failing(10)
    g = reliable(f, max_attempts=4, base_delay=0.5, factor=3.0, jitter=0.0, sleep=sleeps)
    with pytest.raises(ConnectionError):
        g()
    assert len(calls) == 4
    assert sleeps.waits == [0.5, 1.5, 4.5]


def test_a_zero_base_delay_retries_at_once(sleeps: Sleeps) -> None:
    calls, f = failing(2)
    assert reliable(f, base_delay=0, sleep=sleeps)() == "ok"
    assert sleeps.waits == [0.0, 0.0]
    assert exp_backoff(4, 0.0) == 0.0


def test_success_after_retries_returns_the_value(sleeps: Sleeps) -> None:
    calls, f = failing(2)
    assert reliable(f, sleep=sleeps, rng=lambda: 0.5)() == "ok"
    assert len(calls) == 3
    assert sleeps.waits == [pytest.approx(0.2), pytest.approx(0.4)]


def test_the_bare_decorator_uses_the_seed_defaults(sleeps: Sleeps) -> None:
    calls, f = failing(100)

    @reliable
    def g() -> str:
        return f()  # type: ignore[no-any-return,operator]

    real_sleep = time.sleep
    try:
        time.sleep = sleeps  # the default sleep is time.sleep, looked up when decorated
        h = reliable(f)
    finally:
        time.sleep = real_sleep
    with pytest.raises(ConnectionError):
        h()
    assert len(calls) == 5  # max_attempts=5
    assert len(sleeps.waits) == 4
    for wait, d in zip(sleeps.waits, [0.2, 0.4, 0.8, 1.6]):
        assert 0.9 * d <= wait <= 1.1 * d
    assert g.__name__ == "g"


def test_a_sync_timeout_gives_up_waiting(sleeps: Sleeps) -> None:
    # Two attempts of 50 ms each: about 0.1 s when the timeout gives up, at least 2 s (the
    # function's own sleep) when it does not. The bound in between leaves a loaded machine 1.4 s.
    @reliable(timeout=0.05, max_attempts=2, sleep=sleeps)
    def hangs() -> None:
        time.sleep(2.0)

    t0 = time.perf_counter()
    with pytest.raises(TimeoutError):
        hangs()
    assert time.perf_counter() - t0 < 1.5
    assert len(sleeps.waits) == 1


class FakeResponse:
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status_code = status
        self.headers = headers


class HTTPError(Exception):
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(status)
        self.response = FakeResponse(status, headers or {})


def test_retry_after_from_an_error_response_is_honoured_and_capped(sleeps: Sleeps) -> None:
    calls, f = failing(2, HTTPError(429, {"Retry-After": "7"}))
    assert reliable(f, jitter=0.0, sleep=sleeps)() == "ok"
    assert sleeps.waits == [7.0, 7.0]
    calls, f = failing(1, HTTPError(503, {"retry-after": "86400"}))
    assert reliable(f, jitter=0.0, sleep=sleeps, retry_after_cap=30.0)() == "ok"
    assert sleeps.waits[-1] == 30.0


@pytest.mark.parametrize("header", ["soon", "-5", "nan", "inf", "1e999", "x" * 1000, ""])
def test_a_hostile_retry_after_is_ignored_or_clamped(header: str) -> None:
    value = retry_after_of(FakeResponse(429, {"Retry-After": header}))
    assert value is None or 0.0 <= value <= 1e9


def test_an_http_date_retry_after() -> None:
    from email.utils import formatdate

    value = retry_after_of(FakeResponse(429, {"Retry-After": formatdate(time.time() + 60, usegmt=True)}))
    assert value is not None and 55 <= value <= 61


def test_a_client_error_is_not_retried_and_does_not_count_against_the_breaker(clock: Clock) -> None:
    breaker = CircuitBreaker(failure_rate=1.0, window=1, cooldown=10.0, probe=1, clock=clock)
    calls, f = failing(5, HTTPError(400))
    with pytest.raises(HTTPError):
        reliable(f, breaker=breaker, sleep=lambda s: None)()
    assert len(calls) == 1
    assert breaker.state == "closed"


def test_httpx_and_requests_are_recognised_but_never_imported(tmp_path: Path) -> None:
    """Stand-ins for httpx and requests are importable here; reliable must not import them, and
    must recognise their errors once the program has."""
    import subprocess

    (tmp_path / "httpx.py").write_text(
        "class HTTPStatusError(Exception):\n"
        "    def __init__(self, response):\n"
        "        self.response = response\n"
    )
    (tmp_path / "requests.py").write_text("class HTTPError(Exception):\n    pass\n")
    code = (
        "import sys, reliable\n"
        "calls = []\n"
        "def f():\n"
        "    calls.append(1)\n"
        "    if len(calls) < 2: raise ConnectionError()\n"
        "reliable.reliable(f, sleep=lambda s: None)()\n"
        "print(sorted(m for m in ('httpx', 'requests') if m in sys.modules))\n"
        "import httpx\n"
        "class R:\n"
        "    status_code = 429\n"
        "    headers = {'Retry-After': '4'}\n"
        "print(reliable.classify(httpx.HTTPStatusError(R())))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    # timeout: a hang fails the test (run() kills the child) instead of stalling the suite.
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, timeout=120
    )
    assert out.stdout.split("\n")[:2] == ["[]", "('throttled', 4.0)"]


def test_a_retry_budget_bounds_retries_across_calls(sleeps: Sleeps) -> None:
    budget = RetryBudget(0.1, min_per_sec=0, ttl=10.0)
    total = 0
    for _ in range(100):
        calls, f = failing(100)
        with pytest.raises(ConnectionError):
            reliable(f, max_attempts=5, budget=budget, sleep=sleeps)()
        total += len(calls)
    # 100 first tries may buy 10 retries, however many each call wanted (400 without a budget).
    assert total == 110


def test_on_call_reports_attempts_outcome_and_reason(sleeps: Sleeps) -> None:
    records: list[CallRecord] = []
    calls, f = failing(1)
    reliable(f, on_call=records.append, sleep=sleeps)()
    calls, g = failing(9)
    with pytest.raises(ConnectionError):
        reliable(g, max_attempts=2, on_call=records.append, sleep=sleeps)()
    assert [(r.attempts, r.outcome, r.reason) for r in records] == [
        (2, "success", None),
        (2, "failure", "max-attempts"),
    ]


def test_retry_after_ms_and_x_should_retry(sleeps: Sleeps) -> None:
    calls, f = failing(1, HTTPError(429, {"retry-after-ms": "1500", "Retry-After": "9"}))
    assert reliable(f, jitter=0.0, sleep=sleeps)() == "ok"
    assert sleeps.waits == [1.5]
    calls, f = failing(5, HTTPError(500, {"X-Should-Retry": "false"}))
    with pytest.raises(HTTPError):
        reliable(f, sleep=sleeps)()
    assert len(calls) == 1
    calls, f = failing(1, HTTPError(400, {"x-should-retry": "true"}))
    assert reliable(f, sleep=sleeps)() == "ok"
    assert len(calls) == 2


@pytest.mark.parametrize(
    "status,headers,want",
    [
        (500, {}, ("transient", None)),
        (501, {}, ("transient", None)),
        (409, {}, ("transient", None)),
        (408, {}, ("transient", None)),
        (404, {}, ("fatal", None)),
        (429, {}, ("throttled", None)),
        (529, {}, ("throttled", None)),
        (502, {"Retry-After": "3"}, ("throttled", 3.0)),
        (500, {"x-should-retry": "false"}, ("dont_retry", None)),
        (404, {"x-should-retry": "false"}, ("fatal", None)),
        (404, {"x-should-retry": "true"}, ("transient", None)),
        (503, {"retry-after-ms": "20.5"}, ("throttled", 0.0205)),
    ],
)
def test_http_answers_read_as_the_std_crate_reads_them(
    status: int, headers: dict[str, str], want: tuple[str, float | None]
) -> None:
    from reliable import classify

    kind, delay = classify(HTTPError(status, headers))
    assert (kind, delay if delay is None else pytest.approx(delay)) == (want[0], want[1])
