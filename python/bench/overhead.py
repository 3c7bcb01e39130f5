"""Overhead of a successful decorated call: reliable (this package) next to the usual pure-Python
stack and a bare call, in one run.

    pip install reliablekit pybreaker==1.4.1 tenacity==9.2.1 aiobreaker==1.2.0
    python bench/overhead.py [--quick]

Each row is the median over REPEATS runs of NUMBER calls (timeit); "overhead" subtracts the bare
call measured in the same run. Time is the process's CPU time (``time.process_time``), not wall
time: on a shared, overloaded machine a process may get a small share of a core, and wall time
then measures the neighbours (``--wall`` measures wall time anyway). Stacks, all with a breaker and up to 5 attempts with jittered
exponential backoff (nothing fails, so nothing waits):

- sync:  ``@reliable(breaker=CircuitBreaker())`` vs ``@tenacity.retry(...)`` over
  ``@pybreaker.CircuitBreaker()``;
- async: the same ``@reliable`` on an ``async def`` vs ``@tenacity.retry`` over aiobreaker
  (pybreaker's own async support needs Tornado; aiobreaker is its asyncio port);
- threads: 8 threads calling functions that share one breaker (time per call, all threads).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import threading
import time
import timeit
from datetime import timedelta
from typing import Any, Callable

import aiobreaker
import pybreaker
import tenacity

import reliable

QUICK = "--quick" in sys.argv
TIMER = time.perf_counter if "--wall" in sys.argv else time.process_time
NUMBER = 20_000 if QUICK else 100_000
REPEATS = 5 if QUICK else 11
THREADS = 8


def tenacity_retry() -> Any:
    return tenacity.retry(
        stop=tenacity.stop_after_attempt(5),
        wait=tenacity.wait_exponential(multiplier=0.2) + tenacity.wait_random(0, 0.04),
        reraise=True,
    )


def per_call(fn: Callable[[], object], number: int = NUMBER) -> float:
    """Median seconds per call of `fn()` over REPEATS runs."""
    runs = timeit.repeat(fn, number=number, repeat=REPEATS, timer=TIMER)
    return statistics.median(runs) / number


def per_call_async(make: Callable[[], Any], number: int = NUMBER) -> float:
    """Median seconds per awaited call, `number` awaits in one coroutine per run."""

    async def loop() -> None:
        for _ in range(number):
            await make()

    runs = []
    for _ in range(REPEATS):
        t0 = TIMER()
        asyncio.run(loop())
        runs.append(TIMER() - t0)
    return statistics.median(runs) / number


def per_call_threads(fn: Callable[[], object], number: int = NUMBER // THREADS) -> float:
    """Median seconds per call with THREADS threads each making `number` calls."""
    runs = []
    for _ in range(REPEATS):
        start = threading.Barrier(THREADS + 1)

        def work() -> None:
            start.wait()
            for _ in range(number):
                fn()

        threads = [threading.Thread(target=work) for _ in range(THREADS)]
        for t in threads:
            t.start()
        t0 = TIMER()
        start.wait()
        for t in threads:
            t.join()
        runs.append(TIMER() - t0)
    return statistics.median(runs) / (number * THREADS)


def main() -> None:
    def bare() -> int:
        return 1

    async def abare() -> int:
        return 1

    ours = reliable.reliable(bare, breaker=reliable.CircuitBreaker())
    aours = reliable.reliable(abare, breaker=reliable.CircuitBreaker())
    peers = tenacity_retry()(pybreaker.CircuitBreaker(fail_max=5, reset_timeout=30)(bare))
    apeers = tenacity_retry()(
        aiobreaker.CircuitBreaker(fail_max=5, timeout_duration=timedelta(seconds=30))(abare)
    )
    shared = reliable.CircuitBreaker()
    ours_threads = reliable.reliable(bare, breaker=shared)
    peers_threads = tenacity_retry()(pybreaker.CircuitBreaker(fail_max=5, reset_timeout=30)(bare))

    for fn in (ours, peers, ours_threads, peers_threads):  # warm up
        per_call(fn, 1000)

    rows = [
        ("sync", per_call(bare), per_call(ours), per_call(peers)),
        ("async", per_call_async(abare), per_call_async(aours), per_call_async(apeers)),
        (
            f"{THREADS} threads, one breaker",
            per_call_threads(bare),
            per_call_threads(ours_threads),
            per_call_threads(peers_threads),
        ),
    ]
    from importlib.metadata import version

    peers = ", ".join(f"{p} {version(p)}" for p in ("pybreaker", "tenacity", "aiobreaker"))
    print(
        f"python {sys.version.split()[0]}, reliablekit {version('reliablekit')}, {peers}; "
        f"median of {REPEATS} x {NUMBER} calls; "
        f"{'wall' if TIMER is time.perf_counter else 'CPU'} time per call"
    )
    print()
    print("| call | bare | reliable | pybreaker+tenacity | reliable overhead | peers' overhead | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, b, o, p in rows:
        ours_over, peers_over = o - b, p - b
        print(
            f"| {name} | {b * 1e9:.0f} ns | {o * 1e9:.0f} ns | {p * 1e9:.0f} ns | "
            f"{ours_over * 1e9:.0f} ns | {peers_over * 1e9:.0f} ns | {ours_over / peers_over:.2f} |"
        )


if __name__ == "__main__":
    main()
