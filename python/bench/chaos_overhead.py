"""What chaos costs a call when it injects nothing: the same decorated function with no chaos,
with a Chaos whose every strategy is switched off (one FFI call that loads one atomic byte), and
with a fault switched on at rate 0 (the core draws for every attempt and hits none).

    python bench/chaos_overhead.py [REPEATS] [CALLS]

Each variant is timed CALLS calls at a time, variants interleaved, REPEATS times; the table gives
the minimum per call (timeit's advice: the minimum is the least disturbed run). Figures are for
this machine and are not asserted anywhere.
"""

from __future__ import annotations

import sys
import time

import reliable
from reliable import Chaos

REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000


def work(x: int) -> int:
    return x + 1


variants = {
    "no chaos": reliable.reliable(work, max_attempts=3),
    "chaos, every strategy off": reliable.reliable(
        work, max_attempts=3,
        chaos=Chaos(fault={"rate": 0.1, "status": 503, "enabled": False},
                    latency={"rate": 0.1, "delay": 0.1, "enabled": False})),
    "chaos, fault on at rate 0": reliable.reliable(
        work, max_attempts=3, chaos=Chaos(fault={"rate": 0.0, "status": 503})),
}
best = {name: float("inf") for name in variants}
for _ in range(REPEATS):
    for name, f in variants.items():
        start = time.perf_counter()
        for i in range(CALLS):
            f(i)
        best[name] = min(best[name], (time.perf_counter() - start) / CALLS)
base = best["no chaos"]
print(f"python {sys.version.split()[0]}, {CALLS} calls x {REPEATS} repeats, minimum per call:")
for name, t in best.items():
    print(f"  {name:28} {t * 1e9:8.0f} ns  ({(t - base) * 1e9:+.0f} ns)")

# The chaos layer's own step, alone (whole calls above vary by more than it on a loaded machine).
import timeit  # noqa: E402

for name, c in [("every strategy off", Chaos(fault={"rate": 0.1, "status": 503, "enabled": False})),
                ("fault on at rate 0", Chaos(fault={"rate": 0.0, "status": 503}))]:
    per = min(timeit.repeat(c._decide, number=CALLS * 10, repeat=REPEATS)) / (CALLS * 10)
    print(f"  Chaos._decide(), {name:20} {per * 1e9:6.0f} ns")
