# The Rust extension: the core's decisions. The public names are re-exported by `reliable`.
import os
import random
from typing import Any, Callable, Mapping, Optional, Union

# ``rng``: a callable returning a float in [0, 1) (the seed's), or a ``random.Random``.
_Rng = Union[Callable[[], float], random.Random]

class CircuitBreaker:
    def __init__(
        self,
        failure_rate: float = 0.5,
        window: int = 20,
        cooldown: float = 30.0,
        probe: int = 3,
        clock: Optional[Callable[[], float]] = None,
        rng: Optional[_Rng] = None,
        *,
        minimum_calls: Optional[int] = None,
        probe_limit: Optional[int] = None,
        probe_timeout: float = 30.0,
        cooldown_growth: float = 1.0,
        cooldown_max: Optional[float] = None,
        cooldown_jitter: float = 0.0,
        on_transition: Optional[Callable[[str, str, float], object]] = None,
    ) -> None: ...
    @property
    def state(self) -> str: ...
    @property
    def retry_after(self) -> Optional[float]: ...
    @property
    def stats(self) -> dict[str, Union[str, int, float]]: ...
    def reset(self) -> None: ...
    def force_open(self) -> None: ...
    def _acquire(self) -> Union[Ticket, float, None]: ...
    def _record(self, ticket: Ticket, outcome: str) -> None: ...

class Ticket: ...

class RetryBudget:
    def __init__(self, ratio: float = 0.1, *, min_per_sec: int = 10, ttl: float = 10.0) -> None: ...
    @staticmethod
    def token_bucket(
        max_tokens: float,
        *,
        retry_cost: float = 1.0,
        failure_cost: float = 0.0,
        success_credit: float = 0.0,
        first_try_credit: float = 0.0,
        retry_above: Optional[float] = None,
    ) -> RetryBudget: ...

class Reservation: ...

class SpendBudget:
    def __init__(
        self,
        *,
        price_in: float = 0.0,
        price_out: float = 0.0,
        minute_tokens: Optional[int] = None,
        minute_cost: Optional[float] = None,
        day_tokens: Optional[int] = None,
        day_cost: Optional[float] = None,
        month_tokens: Optional[int] = None,
        month_cost: Optional[float] = None,
        throttle_below: float = 0.1,
        clock: Optional[Callable[[], float]] = None,
    ) -> None: ...
    @property
    def state(self) -> str: ...
    @property
    def usage(self) -> dict[str, tuple[int, float]]: ...
    def settle(self, reservation: Reservation, input_tokens: int, output_tokens: int) -> float: ...
    def cancel(self, reservation: Reservation) -> float: ...
    def money_limit(self, reset_after: Optional[float] = None) -> None: ...
    def _reserve(self, input_tokens: int, max_output_tokens: int) -> Union[Reservation, tuple[str, float]]: ...

class Run:
    @property
    def attempts(self) -> int: ...
    def answer(self, n: int, kind: Optional[str] = None, retry_after: Optional[float] = None) -> None: ...
    def dropped(self, n: int) -> None: ...
    def tick(self) -> None: ...
    def woke(self) -> None: ...
    def cancel(self) -> None: ...
    def poll(self) -> list[tuple[Any, ...]]: ...
    def wait(self) -> Optional[float]: ...
    def events(self) -> list[tuple[str, dict[str, Any]]]: ...

class Store:
    @staticmethod
    def redis(url: str, namespace: str = "reliable") -> Store: ...
    @staticmethod
    def memory(namespace: str = "reliable") -> Store: ...

# A policy read from a file (``from_json``, ``from_ron``, ``from_file``) holds the state of its
# ``Shared`` layers; each function decorated with it (``reliable(fn, policy=...)``) is a client of
# it, with its own state for the ``PerClient`` layers (the policy format's default scope).
class Policy:
    @staticmethod
    def from_json(
        text: str,
        *,
        file: str = "<json>",
        clock: Optional[Callable[[], float]] = None,
        rng: Optional[_Rng] = None,
        stores: Optional[Mapping[str, Store]] = None,
    ) -> Policy: ...
    @staticmethod
    def from_ron(
        text: str,
        name: Optional[str] = None,
        *,
        scenario: Optional[str] = None,
        file: str = "<ron>",
        clock: Optional[Callable[[], float]] = None,
        rng: Optional[_Rng] = None,
        stores: Optional[Mapping[str, Store]] = None,
    ) -> Policy: ...
    @staticmethod
    def from_file(
        path: Union[str, "os.PathLike[str]"],
        name: Optional[str] = None,
        *,
        scenario: Optional[str] = None,
        clock: Optional[Callable[[], float]] = None,
        rng: Optional[_Rng] = None,
        stores: Optional[Mapping[str, Store]] = None,
    ) -> Policy: ...
    @property
    def breaker(self) -> Optional[CircuitBreaker]:
        """The breaker of the policy's ``Shared`` scope, one for every function decorated with
        it; ``None`` when the breaker is ``PerClient`` (each decorated function has its own),
        the fleet's (``fleet_state``), or absent."""
    @property
    def fleet_state(self) -> Optional[str]: ...
    @property
    def name(self) -> str: ...
    @property
    def hedges(self) -> bool: ...
    def _client(self) -> Policy:
        """What one decorated function runs: the ``Shared`` layers this policy's state, the
        ``PerClient`` ones its own (the decorator makes one per function)."""
    def start(self, listen: bool = False) -> Run: ...

def seed_policy(
    *,
    breaker: Optional[CircuitBreaker],
    timeout: Optional[float],
    max_attempts: int,
    base_delay: float,
    factor: float,
    jitter: float,
    rng: Optional[_Rng],
    budget: Optional[RetryBudget],
    max_delay: Optional[float],
    retry_after_cap: float,
    clock: Optional[Callable[[], float]] = None,
) -> Policy: ...
def classify_http(status: int, headers: list[tuple[str, str]]) -> Optional[tuple[str, Optional[float]]]: ...
def server_delay(headers: list[tuple[str, str]]) -> Optional[float]: ...
def exp_backoff(
    attempt: int,
    base: float = 0.2,
    factor: float = 2.0,
    jitter: float = 0.1,
    rng: Optional[_Rng] = None,
) -> float: ...


class Chaos:
    """Chaos injection (fault, latency, outcome, behavior), decided by the core."""
    def __init__(
        self,
        *,
        fault: Optional[dict[str, Any]] = None,
        latency: Optional[dict[str, Any]] = None,
        outcome: Optional[dict[str, Any]] = None,
        behavior: Optional[dict[str, Any]] = None,
        name: str = "chaos",
    ) -> None: ...
    def set_enabled(self, strategy: str, on: bool) -> None: ...
    @property
    def enabled(self) -> list[str]: ...
    @property
    def attempts(self) -> int: ...
    @staticmethod
    def kill_all(killed: bool = True) -> None: ...
    @staticmethod
    def killed() -> bool: ...
    def _decide(self) -> Optional[tuple[list[tuple[str, int, Optional[float]]], Optional[Callable[[], object]], Optional[float], Optional[tuple[Any, ...]]]]: ...

class ChaosTimeline:
    """A scenario file's client-visible faults, played by wall clock."""
    @staticmethod
    def from_scenario(
        text: str, downstream: str, *, seed: Optional[int] = None, clock: Optional[Callable[[], float]] = None
    ) -> ChaosTimeline: ...
    def restart(self) -> None: ...
    @property
    def faults(self) -> list[tuple[str, float, float]]: ...
    @property
    def attempts(self) -> int: ...
    def _elapsed(self) -> float: ...
    def _send(self, n: Optional[int] = None) -> tuple[int, tuple[Any, ...]]: ...
    def _answer(self, n: int, success: bool) -> tuple[Any, ...]: ...

def chaos_draw(seed: int, stream: int, n: int) -> int: ...
