"""reliable: timeout, jittered backoff, a sliding-window circuit breaker and retry budgets for LLM
and agent calls, with the API of reliablekit 0.1.

Every decision (does the breaker admit this call, what does its result do to the breaker, is a
failed attempt retried and after how long, does the budget allow it) is made by the Rust core of
the ``reliable`` project through ``reliable._core``. This module only runs your function, waits
and raises.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
import threading
import time
from typing import Any, NamedTuple

from ._core import CircuitBreaker, RetryBudget, SpendBudget, exp_backoff
from ._core import Policy as _Policy
from ._core import classify_http as _classify_http
from ._core import server_delay as _server_delay

__all__ = [
    "CallRecord",
    "CircuitBreaker",
    "CircuitOpenError",
    "RetryBudget",
    "Served",
    "SpendBudget",
    "SpendLimitError",
    "classify",
    "exp_backoff",
    "fallback",
    "reliable",
    "retry_after_of",
]
__version__ = "0.2.0"


class CircuitOpenError(Exception):
    """Raised instead of calling the function while its breaker is open.

    ``retry_after`` is the number of seconds until the breaker lets a probe through (``None`` when
    that is not known: every half-open probe slot taken, or opened by hand).
    """

    def __init__(self, retry_after: float | None = None, message: str | None = None) -> None:
        self.retry_after = retry_after
        if message is None:
            message = (
                "circuit open"
                if retry_after is None
                else f"circuit open; retry after {retry_after:.3f}s"
            )
        super().__init__(message)


class SpendLimitError(CircuitOpenError):
    """Raised instead of calling when the spend budget has no room for the call's estimate.

    ``reason`` says which limit: ``minute-ceiling``, ``day-ceiling``, ``month-ceiling``,
    ``too-large-for-minute`` (the estimate alone exceeds a ceiling), ``money-limit``;
    ``retry_after`` is when the call would fit.
    """

    def __init__(self, reason: str, retry_after: float | None) -> None:
        self.reason = reason
        super().__init__(retry_after, f"spend budget refused the call ({reason})")


class CallRecord(NamedTuple):
    """What the ``on_call`` metrics hook receives once per decorated call."""

    function: str
    attempts: int
    seconds: float
    outcome: str  # "success", "failure", "rejected", "fallback" or "cancelled"
    reason: str | None  # why retrying stopped: "max-attempts", "budget", "fatal", ...


# --- What an exception means -----------------------------------------------------------------


def _http_response(exc: BaseException) -> Any:
    """The HTTP response an httpx or requests error (or an SDK error shaped like them) carries.

    httpx and requests are looked up in ``sys.modules``, never imported: if the program has not
    imported them, none of its exceptions can be theirs.
    """
    httpx = sys.modules.get("httpx")
    if httpx is not None and isinstance(exc, getattr(httpx, "HTTPStatusError", ())):
        return exc.response  # type: ignore[attr-defined]
    requests = sys.modules.get("requests")
    if requests is not None and isinstance(exc, getattr(requests, "HTTPError", ())):
        return exc.response  # type: ignore[attr-defined]
    response = getattr(exc, "response", None)
    if isinstance(getattr(response, "status_code", None), int):
        return response
    return None


def _header_pairs(response: Any) -> list[tuple[str, str]]:
    """A response's headers as (name, value) text pairs, from any mapping-like ``headers``
    (httpx, requests, a dict); at most 256, values over 4 KiB dropped: a response is hostile."""
    headers = getattr(response, "headers", None)
    pairs: list[tuple[str, str]] = []
    try:
        items = headers.items() if headers is not None else ()
        for name, value in items:
            if isinstance(name, bytes):
                name = name.decode("latin-1")
            if isinstance(value, bytes):
                value = value.decode("latin-1")
            if isinstance(name, str) and isinstance(value, str) and len(value) <= 4096:
                pairs.append((name, value))
            if len(pairs) >= 256:
                break
    except Exception:
        return []
    return pairs


def retry_after_of(response: Any) -> float | None:
    """The server's requested wait in seconds: ``retry-after-ms``, else ``Retry-After`` (seconds
    or an HTTP date), read by the same code as every other face of the project; ``None`` when
    absent or not a valid value. The retry policy honours it up to ``retry_after_cap``."""
    return _server_delay(_header_pairs(response))


def classify(exc: BaseException) -> tuple[str, float | None]:
    """The default error class of an exception, as the core's retry policy reads it.

    - a timeout: ``"timeout"`` (retried, counts against the breaker);
    - an HTTP error with a response (httpx, requests, or any exception whose ``response`` has
      an int ``status_code``): the project's one table of HTTP answers. 429, 503 and 529 are
      ``"throttled"`` with the server's ``retry-after-ms`` / ``Retry-After``; 408, 409 and
      other 5xx ``"transient"`` (``"throttled"`` when the server sent a delay); other 4xx
      ``"fatal"`` (not retried, not held against the downstream); ``x-should-retry: true``
      makes any status retryable, ``false`` stops (``"fatal"`` for a 4xx, else
      ``"dont_retry"``);
    - anything else: ``"transient"`` (retried, counts against the breaker), as in reliablekit 0.1.
    """
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return ("timeout", None)
    response = _http_response(exc)
    if response is not None:
        status = response.status_code
        if 100 <= status <= 599:
            answer = _classify_http(status, _header_pairs(response))
            if answer is not None:
                return answer
    return ("transient", None)


# --- Running one attempt ---------------------------------------------------------------------


def _with_timeout(fn: Any, timeout: float, args: Any, kwargs: Any) -> Any:
    """Runs a synchronous attempt in a daemon thread and stops waiting after ``timeout`` seconds.

    Python cannot stop a thread: a timed-out attempt keeps running in the background, as in
    reliablekit 0.1; give the HTTP client its own timeout too. ``async def`` functions get true
    cancellation instead.
    """
    outcome: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, fn(*args, **kwargs)))
        except BaseException as exc:  # handed to the caller's thread
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name="reliable-attempt", daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError(f"attempt timed out after {timeout}s")
    ok, value = outcome[0]
    if ok:
        return value
    raise value


def _name(fn: Any) -> str:
    return str(
        getattr(fn, "__served_by__", None)
        or getattr(fn, "name", None)
        or getattr(fn, "__qualname__", None)
        or repr(fn)
    )


def _check_callable(param: str, value: Any) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"{param}: must be callable or None, got {type(value).__name__}")


def _is_async(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)
    )


# --- The decorator ---------------------------------------------------------------------------


def reliable(
    fn: Any = None,
    *,
    breaker: CircuitBreaker | None = None,
    timeout: float | None = None,
    max_attempts: int = 5,
    base_delay: float = 0.2,
    factor: float = 2.0,
    jitter: float = 0.1,
    sleep: Any = None,
    rng: Any = None,
    on_open: Any = None,
    budget: RetryBudget | None = None,
    max_delay: float | None = None,
    retry_after_cap: float = 60.0,
    classify: Any = classify,
    on_call: Any = None,
    spend: SpendBudget | None = None,
    estimate: Any = None,
    usage: Any = None,
) -> Any:
    """Wraps ``fn`` (sync or ``async def``) in timeout + jittered exponential backoff + breaker.

    Usable as ``@reliable``, ``@reliable(...)`` or ``reliable(fn, ...)``. Each attempt asks the
    breaker first; while it is open the call is not made: ``on_open(*args, **kwargs)`` answers
    instead, or ``CircuitOpenError`` is raised. A failed attempt is retried after
    ``base_delay * factor**(n-1)`` seconds spread by ±``jitter`` (longer if the server sent a
    ``Retry-After``, up to ``retry_after_cap``), at most ``max_attempts`` attempts in all, and
    only while ``budget`` allows. When it gives up, the last exception is raised.

    With ``spend``, each attempt first reserves ``estimate(*args, **kwargs)`` = ``(input_tokens,
    max_output_tokens)`` under the spend budget's ceilings, then settles ``usage(result)`` (the
    estimate when ``usage`` is None); a failed or cancelled attempt is charged its whole
    estimate. A call that does not fit is answered like an open breaker (``on_open``, or
    ``SpendLimitError``) and not retried.
    """
    _check_callable("sleep", sleep)
    _check_callable("on_open", on_open)
    _check_callable("classify", classify)
    _check_callable("on_call", on_call)
    _check_callable("estimate", estimate)
    _check_callable("usage", usage)
    if spend is not None:
        if not isinstance(spend, SpendBudget):
            raise TypeError(f"spend: must be a SpendBudget or None, got {type(spend).__name__}")
        if estimate is None:
            raise TypeError("estimate: a spend budget needs estimate(*args, **kwargs) -> (input, max_output)")
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
        raise TypeError(f"max_attempts: must be an int, got {type(max_attempts).__name__}")
    policy = _Policy(
        breaker=breaker,
        timeout=timeout,
        max_attempts=max_attempts,
        base_delay=base_delay,
        factor=factor,
        jitter=jitter,
        rng=rng,
        budget=budget,
        max_delay=max_delay,
        retry_after_cap=retry_after_cap,
    )

    def decorate(f: Any) -> Any:
        if not callable(f):
            raise TypeError(f"fn: must be callable, got {type(f).__name__}")
        is_async = _is_async(f)
        make = _async_wrapper if is_async else _sync_wrapper
        attempt = f if spend is None else _spending(f, spend, estimate, usage, is_async)
        wrapper = make(attempt, policy, timeout, sleep, on_open, classify, on_call)
        wrapper = functools.wraps(f)(wrapper)
        # The layers this wrapper adds, innermost first: the breaker guards each attempt.
        served_by = _name(f)
        if breaker is not None:
            served_by = f"breaker({served_by})"
        if max_attempts > 1:
            served_by = f"retry({served_by})"
        wrapper.__served_by__ = served_by
        return wrapper

    if fn is None:
        return decorate
    return decorate(fn)


def _sync_wrapper(fn, policy, timeout, sleep, on_open, classify, on_call):  # type: ignore[no-untyped-def]
    start = policy.start
    sleep = sleep if sleep is not None else time.sleep
    name = _name(fn)

    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        began = time.perf_counter() if on_call is not None else 0.0
        call = start()
        while True:
            retry_after = call.admit()
            if retry_after is not None:
                if on_call is not None:
                    on_call(_record(name, call, began, "rejected" if on_open is None else "fallback"))
                if on_open is not None:
                    return on_open(*args, **kwargs)
                raise CircuitOpenError(retry_after if retry_after >= 0 else None)
            try:
                if timeout is None:
                    result = fn(*args, **kwargs)
                else:
                    result = _with_timeout(fn, timeout, args, kwargs)
            except SpendLimitError:
                call.cancel()  # nothing was sent: the breaker permit goes back uncounted
                if on_call is not None:
                    on_call(_record(name, call, began, "rejected" if on_open is None else "fallback"))
                if on_open is not None:
                    return on_open(*args, **kwargs)
                raise
            except Exception as exc:
                kind, hint = classify(exc)
                delay = call.failure(kind, hint)
                if delay is None:
                    if on_call is not None:
                        on_call(_record(name, call, began, "failure"))
                    raise
                sleep(delay)
                continue
            except BaseException:
                call.cancel()
                if on_call is not None:
                    on_call(_record(name, call, began, "cancelled"))
                raise
            call.success()
            if on_call is not None:
                on_call(_record(name, call, began, "success"))
            return result

    return wrapper


def _async_wrapper(fn, policy, timeout, sleep, on_open, classify, on_call):  # type: ignore[no-untyped-def]
    start = policy.start
    name = _name(fn)

    async def pause(delay: float) -> None:
        if sleep is None:
            await asyncio.sleep(delay)
        else:
            waited = sleep(delay)
            if inspect.isawaitable(waited):
                await waited

    async def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        began = time.perf_counter() if on_call is not None else 0.0
        call = start()
        try:
            while True:
                retry_after = call.admit()
                if retry_after is not None:
                    if on_call is not None:
                        on_call(_record(name, call, began, "rejected" if on_open is None else "fallback"))
                    if on_open is not None:
                        answer = on_open(*args, **kwargs)
                        return await answer if inspect.isawaitable(answer) else answer
                    raise CircuitOpenError(retry_after if retry_after >= 0 else None)
                try:
                    if timeout is None:
                        result = await fn(*args, **kwargs)
                    else:
                        # wait_for cancels the attempt's task when the time is up.
                        result = await asyncio.wait_for(fn(*args, **kwargs), timeout)
                except SpendLimitError:
                    call.cancel()  # nothing was sent: the breaker permit goes back uncounted
                    if on_call is not None:
                        on_call(_record(name, call, began, "rejected" if on_open is None else "fallback"))
                    if on_open is not None:
                        answer = on_open(*args, **kwargs)
                        return await answer if inspect.isawaitable(answer) else answer
                    raise
                except Exception as exc:
                    kind, hint = classify(exc)
                    delay = call.failure(kind, hint)
                    if delay is None:
                        if on_call is not None:
                            on_call(_record(name, call, began, "failure"))
                        raise
                    await pause(delay)
                    continue
                call.success()
                if on_call is not None:
                    on_call(_record(name, call, began, "success"))
                return result
        except BaseException as exc:
            # Cancelled (asyncio.timeout, TaskGroup, task.cancel()) or interrupted: the breaker
            # permit goes back uncounted, so a cancelled half-open probe frees its slot.
            if not isinstance(exc, Exception):
                call.cancel()
                if on_call is not None:
                    on_call(_record(name, call, began, "cancelled"))
            raise

    return wrapper


def _spending(fn, spend, estimate, usage, is_async):  # type: ignore[no-untyped-def]
    """``fn`` with each attempt reserved under, and settled to, the spend budget."""

    def reserve(args: Any, kwargs: Any) -> tuple[Any, int, int]:
        input_tokens, max_output = estimate(*args, **kwargs)
        ticket = spend._reserve(input_tokens, max_output)
        if isinstance(ticket, tuple):
            raise SpendLimitError(*ticket)
        return ticket, input_tokens, max_output

    def settle(ticket: Any, result: Any, input_tokens: int, max_output: int) -> None:
        if usage is None:
            spend.settle(ticket, input_tokens, max_output)
        else:
            spend.settle(ticket, *usage(result))

    if is_async:

        @functools.wraps(fn)
        async def attempt_async(*args, **kwargs):  # type: ignore[no-untyped-def]
            ticket, input_tokens, max_output = reserve(args, kwargs)
            try:
                result = await fn(*args, **kwargs)
            except BaseException:
                spend.cancel(ticket)
                raise
            settle(ticket, result, input_tokens, max_output)
            return result

        return attempt_async

    @functools.wraps(fn)
    def attempt(*args, **kwargs):  # type: ignore[no-untyped-def]
        ticket, input_tokens, max_output = reserve(args, kwargs)
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            spend.cancel(ticket)
            raise
        settle(ticket, result, input_tokens, max_output)
        return result

    return attempt


def _record(name: str, call: Any, began: float, outcome: str) -> CallRecord:
    return CallRecord(name, call.attempts, time.perf_counter() - began, outcome, call.reason)


# --- Layers: the exercise's fallback stack ---------------------------------------------------


class Served(NamedTuple):
    """A fallback's answer and which layer gave it, e.g. ``breaker(retry(primary))``."""

    value: Any
    served_by: str


def fallback(*layers: Any) -> Any:
    """Tries each layer in turn until one answers; returns ``Served(value, served_by)``.

    Layers are functions decorated with ``reliable`` (or any callables); a layer that raises
    (``CircuitOpenError`` included) hands the call to the next one, and the last one's
    exception is raised. ``served_by`` names the layer: ``retry(f)`` for a ``reliable``
    function with more than one attempt, ``breaker(...)`` around it when it has a breaker.
    """
    if not layers:
        raise ValueError("layers: give at least one")
    for layer in layers:
        _check_callable("layers", layer)
    names = [_name(layer) for layer in layers]

    if all(_is_async(layer) for layer in layers):

        async def first_async(*args, **kwargs):  # type: ignore[no-untyped-def]
            for i, layer in enumerate(layers):
                try:
                    return Served(await layer(*args, **kwargs), names[i])
                except Exception:
                    if i == len(layers) - 1:
                        raise
            raise AssertionError("unreachable")

        return first_async

    def first(*args, **kwargs):  # type: ignore[no-untyped-def]
        for i, layer in enumerate(layers):
            try:
                return Served(layer(*args, **kwargs), names[i])
            except Exception:
                if i == len(layers) - 1:
                    raise
        raise AssertionError("unreachable")

    return first
