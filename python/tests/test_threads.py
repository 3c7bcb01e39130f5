"""Many threads on one breaker: lock-free, nothing lost, nothing double-counted."""

from __future__ import annotations

import threading

from reliable import CircuitBreaker, CircuitOpenError, reliable

THREADS = 16
CALLS = 500


def hammer(target: object) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def run() -> None:
        start.wait()
        for _ in range(CALLS):
            try:
                target()  # type: ignore[operator]
            except (CircuitOpenError, ValueError):
                pass
            except BaseException as exc:  # anything else is a bug
                errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_a_healthy_downstream_stays_closed_and_every_call_is_counted() -> None:
    breaker = CircuitBreaker(failure_rate=0.5, window=100, cooldown=30.0, probe=3)
    served = 0
    lock = threading.Lock()

    @reliable(breaker=breaker, max_attempts=1)
    def ok() -> None:
        nonlocal served
        with lock:
            served += 1

    assert hammer(ok) == []
    assert served == THREADS * CALLS
    stats = breaker.stats
    assert stats["state"] == "closed"
    assert stats["calls"] == 100 and stats["failures"] == 0


def test_a_failing_downstream_trips_once_and_is_then_left_alone() -> None:
    breaker = CircuitBreaker(failure_rate=0.5, window=20, cooldown=3600.0, probe=3)
    tried = 0
    lock = threading.Lock()

    @reliable(breaker=breaker, max_attempts=1)
    def down() -> None:
        nonlocal tried
        with lock:
            tried += 1
        raise ValueError("503")

    assert hammer(down) == []
    assert breaker.state == "open"
    # The window trips at its 20th failure; calls admitted before that moment may still finish
    # (at most one per thread), and nothing after.
    assert 20 <= tried <= 20 + THREADS
    assert breaker.stats["generation"] == 1  # tripped exactly once
