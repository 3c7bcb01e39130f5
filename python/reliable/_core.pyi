# The Rust extension: the core's decisions. The public names are re-exported by `reliable`.
from typing import Callable, Optional, Union

class CircuitBreaker:
    def __init__(
        self,
        failure_rate: float = 0.5,
        window: int = 20,
        cooldown: float = 30.0,
        probe: int = 3,
        clock: Optional[Callable[[], float]] = None,
        rng: Optional[Callable[[], float]] = None,
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

class Call:
    @property
    def attempts(self) -> int: ...
    @property
    def reason(self) -> Optional[str]: ...
    def admit(self) -> Optional[float]: ...
    def success(self) -> None: ...
    def failure(self, kind: str, retry_after: Optional[float] = None) -> Optional[float]: ...
    def cancel(self) -> None: ...

class Policy:
    def __init__(
        self,
        *,
        breaker: Optional[CircuitBreaker],
        timeout: Optional[float],
        max_attempts: int,
        base_delay: float,
        factor: float,
        jitter: float,
        rng: Optional[Callable[[], float]],
        budget: Optional[RetryBudget],
        max_delay: Optional[float],
        retry_after_cap: float,
    ) -> None: ...
    def start(self) -> Call: ...

def classify_http(status: int, headers: list[tuple[str, str]]) -> Optional[tuple[str, Optional[float]]]: ...
def server_delay(headers: list[tuple[str, str]]) -> Optional[float]: ...
def exp_backoff(
    attempt: int,
    base: float = 0.2,
    factor: float = 2.0,
    jitter: float = 0.1,
    rng: Optional[Callable[[], float]] = None,
) -> float: ...

