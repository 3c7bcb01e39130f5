# Types of the public API (the implementation is __init__.py and the Rust extension _core).
import sys
from typing import Any, Awaitable, Callable, NamedTuple, Optional, TypeVar, Union, overload

if sys.version_info >= (3, 10):
    from typing import ParamSpec
else:  # typing_extensions is only needed by type checkers on 3.9
    from typing_extensions import ParamSpec

from ._core import Chaos as Chaos
from ._core import ChaosTimeline as ChaosTimeline
from ._core import CircuitBreaker as CircuitBreaker
from ._core import Policy as Policy
from ._core import Store as Store
from ._core import _Rng
from ._core import RetryBudget as RetryBudget
from ._core import SpendBudget as SpendBudget
from ._core import exp_backoff as exp_backoff

__version__: str

_P = ParamSpec("_P")
_R = TypeVar("_R")

class CircuitOpenError(Exception):
    retry_after: Optional[float]
    def __init__(self, retry_after: Optional[float] = None, message: Optional[str] = None) -> None: ...

class RefusedError(CircuitOpenError):
    by: str
    def __init__(self, by: str, retry_after: Optional[float] = None) -> None: ...

class SpendLimitError(CircuitOpenError):
    reason: str
    def __init__(self, reason: str, retry_after: Optional[float]) -> None: ...

class ChaosResponse:
    status_code: int
    headers: dict[str, str]
    def __init__(self, status_code: int, headers: dict[str, str]) -> None: ...

class ChaosError(Exception):
    response: ChaosResponse
    def __init__(self, response: ChaosResponse) -> None: ...

class CallRecord(NamedTuple):
    function: str
    attempts: int
    seconds: float
    outcome: str
    reason: Optional[str]

class Served(NamedTuple):
    value: Any
    served_by: str

def classify(exc: BaseException) -> tuple[str, Optional[float]]: ...
def retry_after_of(response: Any) -> Optional[float]: ...
@overload
def reliable(fn: Callable[_P, _R], /) -> Callable[_P, _R]: ...
@overload
def reliable(
    fn: Callable[_P, _R],
    *,
    breaker: Optional[CircuitBreaker] = None,
    timeout: Optional[float] = None,
    max_attempts: int = 5,
    base_delay: float = 0.2,
    factor: float = 2.0,
    jitter: float = 0.1,
    sleep: Optional[Callable[[float], object]] = None,
    rng: Optional[_Rng] = None,
    on_open: Optional[Callable[..., Any]] = None,
    budget: Optional[RetryBudget] = None,
    max_delay: Optional[float] = None,
    retry_after_cap: float = 60.0,
    classify: Callable[[BaseException], tuple[str, Optional[float]]] = ...,
    on_call: Optional[Callable[[CallRecord], object]] = None,
    spend: Optional[SpendBudget] = None,
    estimate: Optional[Callable[..., tuple[int, int]]] = None,
    usage: Optional[Callable[[Any], tuple[int, int]]] = None,
    policy: Optional[Policy] = None,
    on_event: Optional[Callable[[str, dict[str, Any]], object]] = None,
    clock: Optional[Callable[[], float]] = None,
    chaos: Union[Chaos, ChaosTimeline, None] = None,
    uninterruptible: bool = False,
) -> Callable[_P, _R]: ...
@overload
def reliable(
    fn: None = None,
    *,
    breaker: Optional[CircuitBreaker] = None,
    timeout: Optional[float] = None,
    max_attempts: int = 5,
    base_delay: float = 0.2,
    factor: float = 2.0,
    jitter: float = 0.1,
    sleep: Optional[Callable[[float], object]] = None,
    rng: Optional[_Rng] = None,
    on_open: Optional[Callable[..., Any]] = None,
    budget: Optional[RetryBudget] = None,
    max_delay: Optional[float] = None,
    retry_after_cap: float = 60.0,
    classify: Callable[[BaseException], tuple[str, Optional[float]]] = ...,
    on_call: Optional[Callable[[CallRecord], object]] = None,
    spend: Optional[SpendBudget] = None,
    estimate: Optional[Callable[..., tuple[int, int]]] = None,
    usage: Optional[Callable[[Any], tuple[int, int]]] = None,
    policy: Optional[Policy] = None,
    on_event: Optional[Callable[[str, dict[str, Any]], object]] = None,
    clock: Optional[Callable[[], float]] = None,
    chaos: Union[Chaos, ChaosTimeline, None] = None,
    uninterruptible: bool = False,
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]: ...
@overload
def fallback(*layers: Callable[_P, Awaitable[_R]]) -> Callable[_P, Awaitable[Served]]: ...
@overload
def fallback(*layers: Callable[_P, _R]) -> Callable[_P, Served]: ...
