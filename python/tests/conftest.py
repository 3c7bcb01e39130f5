"""Shared test helpers: an injectable clock, sleep and rng, as reliablekit 0.1's tests used."""

from __future__ import annotations

import pytest


class Clock:
    """A clock the test moves by hand (seconds)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Sleeps:
    """Records the waits instead of waiting; optionally moves a clock by them."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.waits: list[float] = []
        self.clock = clock

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.clock is not None:
            self.clock.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()
