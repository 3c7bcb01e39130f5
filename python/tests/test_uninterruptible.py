"""``uninterruptible=True``: each attempt in the caller's thread (or task), its answer taken when it
comes; a late success is the call's, never thrown away and retried. And the default beside it: a
sync attempt with a timer in a thread the caller stops waiting for."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from reliable import CallRecord, Policy, reliable

from conftest import Clock, Sleeps

ROOT = Path(__file__).resolve().parents[2]


class HTTPError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.response = type("Response", (), {"status_code": status, "headers": {}})()


def test_a_late_success_is_the_calls_success_with_one_attempt() -> None:
    # A 50 ms timeout, work that takes 300 ms: the answer comes after the timer and is kept.
    records: list[CallRecord] = []
    threads: list[int] = []

    @reliable(timeout=0.05, max_attempts=3, uninterruptible=True, on_call=records.append)
    def slow() -> str:
        threads.append(threading.get_ident())
        time.sleep(0.3)
        return "late but fine"

    before = threading.active_count()
    t0 = time.perf_counter()
    assert slow() == "late but fine"
    assert time.perf_counter() - t0 >= 0.3
    assert threads == [threading.get_ident()]  # in the caller's thread
    assert threading.active_count() == before  # no thread made, none left running
    assert records[-1].attempts == 1 and records[-1].outcome == "success"


def test_without_it_the_timer_stops_waiting_and_retries() -> None:
    # The old behaviour, unchanged: the attempt runs in a daemon thread the caller stops waiting
    # for at 50 ms; the call retries while the first thread runs on.
    records: list[CallRecord] = []
    threads: list[int] = []
    sleeps = Sleeps()

    @reliable(timeout=0.05, max_attempts=2, sleep=sleeps, on_call=records.append)
    def slow() -> str:
        threads.append(threading.get_ident())
        time.sleep(0.3)
        return "too late"

    with pytest.raises(TimeoutError):
        slow()
    assert records[-1].attempts == 2 and records[-1].outcome == "failure"
    assert len(threads) == 2 and threading.get_ident() not in threads
    assert len(sleeps.waits) == 1


def test_on_the_virtual_clock_the_late_answer_is_taken_as_it_is(clock: Clock) -> None:
    # The work moves the clock past its 300 ms timer; the engine hears the answer at 1 s.
    events: list[tuple[str, dict[str, Any]]] = []
    sent: list[float] = []

    def work() -> str:
        assert threading.get_ident() == caller  # never in a thread of its own
        sent.append(clock.now)
        clock.now += 1.0
        return "ok"

    caller = threading.get_ident()
    f = reliable(work, timeout=0.3, clock=clock, uninterruptible=True,
                 on_event=lambda name, fields: events.append((name, fields)))
    assert f() == "ok"
    assert sent == [0.0]
    assert ("answer", {"n": 1, "class": "ok", "accepted": True}) in events
    assert not any(name == "retry" for name, _ in events)


def test_a_late_failure_is_classified_as_it_is_not_as_a_timeout(clock: Clock) -> None:
    # A 400 after the timer is still a 400: fatal, not retried (a timeout would be retried).
    calls: list[float] = []

    def work() -> str:
        calls.append(clock.now)
        clock.now += 1.0
        raise HTTPError(400)

    f = reliable(work, timeout=0.3, max_attempts=3, clock=clock, sleep=Sleeps(clock),
                 uninterruptible=True)
    with pytest.raises(HTTPError):
        f()
    assert len(calls) == 1
    # A late connection error is retried as one (transient), and the retry's late success kept.
    outcomes: list[Any] = [ConnectionError("reset"), "ok"]

    def flaky() -> str:
        clock.now += 1.0
        out = outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return str(out)

    records: list[CallRecord] = []
    g = reliable(flaky, timeout=0.3, max_attempts=3, clock=clock, sleep=Sleeps(clock),
                 uninterruptible=True, on_call=records.append)
    assert g() == "ok"
    assert records[-1].attempts == 2


def test_async_attempts_are_awaited_in_the_callers_task() -> None:
    tasks: list[Any] = []

    async def slow() -> str:
        tasks.append(asyncio.current_task())
        await asyncio.sleep(0.2)
        return "late"

    async def main() -> tuple[str, Any]:
        records: list[CallRecord] = []
        f = reliable(slow, timeout=0.05, max_attempts=3, uninterruptible=True, on_call=records.append)
        value = await f()
        assert records[-1].attempts == 1
        assert tasks == [asyncio.current_task()]
        # Without it: the attempt's task is cancelled at its timer, then retried.
        tasks.clear()
        g = reliable(slow, timeout=0.05, max_attempts=2, base_delay=0.0, jitter=0.0)
        with pytest.raises(TimeoutError):
            await g()
        assert len(tasks) == 2 and asyncio.current_task() not in tasks
        return value, None

    assert asyncio.run(main())[0] == "late"


def test_a_policy_with_a_timer_runs_uninterruptible(clock: Clock) -> None:
    text = json.dumps({"name": "p", "stack": {"Retry": {"policy": {
        "max_attempts": 3, "attempt_timeout": "300ms",
        "backoff": {"shape": {"Exponential": {"base": "100ms", "factor": 2.0}}, "cap": "1s",
                    "jitter": "None"},
    }, "inner": {"Call": {"downstream": "api"}}}}})
    policy = Policy.from_json(text, clock=clock)
    calls: list[float] = []

    def work() -> str:
        calls.append(clock.now)
        clock.now += 1.0
        return "ok"

    assert reliable(work, policy=policy, uninterruptible=True)() == "ok"
    assert calls == [0.0]


def test_a_hedging_policy_is_refused_with_it_and_a_non_bool_too() -> None:
    hedged = json.dumps({"name": "h", "stack": {"Hedge": {
        "config": {"delay": {"Fixed": "20ms"}, "max_hedges": 1}, "idempotent": True,
        "inner": {"Call": {"downstream": "api", "timeout": "1s"}}}}})
    policy = Policy.from_json(hedged)
    with pytest.raises(TypeError, match="uninterruptible: the policy hedges"):
        reliable(lambda: 1, policy=policy, uninterruptible=True)
    reliable(lambda: 1, policy=policy)  # without it, hedging as before
    with pytest.raises(TypeError, match="uninterruptible: must be a bool, got str"):
        reliable(lambda: 1, uninterruptible="yes")  # type: ignore[arg-type]


def test_the_conformance_face_runs_late_success_kept() -> None:
    spec = importlib.util.spec_from_file_location("late_runner", ROOT / "python" / "conformance" / "run.py")
    assert spec is not None and spec.loader is not None
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    sequence = json.loads((ROOT / "conformance" / "sequences" / "late-success-kept.json").read_text())
    want = (ROOT / "conformance" / "traces" / "late-success-kept.jsonl").read_text().splitlines()
    assert runner.Face(sequence).run() == want
