"""The layered-stack exercise's 12-row table: fallback(breaker(retry(primary)), retry(backup)),
five simulated seconds between requests, the primary failing on its 3rd to 8th calls."""

from __future__ import annotations

import asyncio

from reliable import CircuitBreaker, fallback, reliable

from conftest import Clock

# request, time, breaker state before the request, answered by, primary calls after it
TABLE = [
    (1, 5, "closed", "breaker(retry(primary))", 1),
    (2, 10, "closed", "breaker(retry(primary))", 2),
    (3, 15, "closed", "retry(backup)", 4),
    (4, 20, "closed", "retry(backup)", 6),
    (5, 25, "open", "retry(backup)", 6),
    (6, 30, "open", "retry(backup)", 6),
    (7, 35, "open", "retry(backup)", 6),
    (8, 40, "half_open", "retry(backup)", 8),
    (9, 45, "open", "retry(backup)", 8),
    (10, 50, "open", "retry(backup)", 8),
    (11, 55, "open", "retry(backup)", 8),
    (12, 60, "half_open", "breaker(retry(primary))", 9),
]


class ServerError(Exception):
    pass


class FakeProvider:
    """Answers from a script: a string is a reply, an exception is raised."""

    def __init__(self, name: str, script: list[object]) -> None:
        self.name = name
        self.script = script
        self.calls: list[object] = []

    async def __call__(self, messages: object) -> object:
        self.calls.append(messages)
        answer = self.script[len(self.calls) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer


async def no_sleep(seconds: float) -> None:
    pass


def test_the_exercise_table_row_by_row() -> None:
    clock = Clock()
    primary = FakeProvider("primary", ["primary ok"] * 2 + [ServerError("down")] * 6 + ["primary ok"] * 20)
    backup = FakeProvider("backup", ["backup ok"] * 20)
    # The exercise's breaker: open after 2 failures in a row, for 20 s, then one trial.
    breaker = CircuitBreaker(failure_rate=1.0, window=2, cooldown=20.0, probe=1, clock=clock)
    guarded = reliable(reliable(primary, max_attempts=2, sleep=no_sleep), breaker=breaker, max_attempts=1)
    stack = fallback(guarded, reliable(backup, max_attempts=2, sleep=no_sleep))

    async def main() -> list[tuple[int, int, str, str, int]]:
        rows = []
        for n in range(1, 13):
            clock.now = n * 5.0
            before = breaker.state
            reply = await stack([{"role": "user", "content": "hi"}])
            rows.append((n, int(clock.now), before, reply.served_by, len(primary.calls)))
        return rows

    assert asyncio.run(main()) == TABLE
