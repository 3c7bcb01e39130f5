"""reliable: timeout, jittered backoff, a sliding-window circuit breaker and retry budgets for LLM
and agent calls, with the API of reliablekit 0.1.

Every decision of a call (does the breaker admit it, what does its result do to the breaker,
is a failed attempt retried and after how long, does the budget allow it, is a hedge sent, does
a limit admit it) is taken by the call engine of the Rust core of the ``reliable`` project,
through ``reliable._core``. This module only does what the engine asks: it calls your function,
keeps timers, cancels copies that lost, and raises.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import queue
import sys
import threading
import time
from typing import Any, NamedTuple

from ._core import Chaos, ChaosTimeline, CircuitBreaker, Policy, RetryBudget, SpendBudget, Store, exp_backoff
from ._core import classify_http as _classify_http
from ._core import seed_policy as _seed_policy
from ._core import server_delay as _server_delay

__all__ = [
    "CallRecord",
    "Chaos",
    "ChaosError",
    "ChaosResponse",
    "ChaosTimeline",
    "CircuitBreaker",
    "CircuitOpenError",
    "Policy",
    "RefusedError",
    "RetryBudget",
    "Served",
    "SpendBudget",
    "SpendLimitError",
    "Store",
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


class RefusedError(CircuitOpenError):
    """Raised instead of calling when a local layer of a policy refuses the call: ``by`` is
    ``"throttle"`` (the adaptive throttle), ``"ledger"`` (no extra attempt left for a probe) or
    ``"limiter"`` (a concurrency or rate limit); ``retry_after`` is when it would admit one, if it
    says. A ``CircuitOpenError``, so ``on_open`` answers it too.
    """

    def __init__(self, by: str, retry_after: float | None = None) -> None:
        self.by = by
        super().__init__(retry_after, f"refused by the {by}")


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


# --- Chaos ---------------------------------------------------------------------------------


class ChaosResponse:
    """An injected answer's response: ``status_code`` and ``headers`` (lower-case names), the
    headers a Rust chaos layer sends with the same answer (``retry-after`` in whole seconds,
    ``retry-after-ms`` when not whole, ``x-should-retry``)."""

    __slots__ = ("status_code", "headers")

    def __init__(self, status_code: int, headers: dict[str, str]) -> None:
        self.status_code = status_code
        self.headers = headers

    def __repr__(self) -> str:
        return f"ChaosResponse({self.status_code}, {self.headers!r})"


class ChaosError(Exception):
    """An injected failed HTTP answer, shaped like an httpx/requests error (``.response``), so
    ``classify`` reads it through the core's answer table exactly as it reads a real one."""

    def __init__(self, response: ChaosResponse) -> None:
        super().__init__(f"chaos: injected HTTP {response.status_code}")
        self.response = response


def _injected(answer: tuple[Any, ...]) -> Any:
    """What an injected answer is in Python: a ``ChaosResponse`` returned (a success by the core's
    table), a ``ChaosError`` raised (a failure), a reset connection, or the user's exception or
    value."""
    kind = answer[0]
    if kind == "status":
        _, status, headers = answer
        response = ChaosResponse(status, dict(headers))
        if _classify_http(status, headers) is None:
            return response
        raise ChaosError(response)
    if kind == "reset":
        raise ConnectionResetError("chaos: connection reset injected")
    if kind == "raise":
        raise answer[1]
    return answer[1]


def _tell(on_event: Any, events: Any) -> None:
    """The injections, to ``on_event`` as ``("chaos", {"event", "attempt", "delay"})``: the event
    named as Polly names it (``Chaos.OnFault``, ...), the attempt's number through the chaos
    layer (from 0), the injected delay in seconds (latency) or ``None``."""
    if on_event is not None:
        for event, attempt, delay in events:
            on_event("chaos", {"event": event, "attempt": attempt, "delay": delay})


async def _pause(sleep: Any, delay: float) -> None:
    """An injected delay of an async attempt: the caller's `sleep` if given, else asyncio's."""
    waited = (asyncio.sleep if sleep is None else sleep)(delay)
    if inspect.isawaitable(waited):
        await waited


def _chaotic(fn: Any, chaos: Any, sleep: Any, is_async: bool, on_event: Any) -> Any:
    """``fn`` with each attempt first through ``chaos`` (a ``Chaos`` or a ``ChaosTimeline``): an
    injected answer replaces the call, an injected delay is slept before it (with the
    decorator's ``sleep``), a hang never answers (only the attempt's timeout ends it)."""
    if isinstance(chaos, ChaosTimeline):
        return _replayed(fn, chaos, sleep, is_async, on_event)
    decide = chaos._decide

    if is_async:

        @functools.wraps(fn)
        async def attempt_async(*args, **kwargs):  # type: ignore[no-untyped-def]
            d = decide()
            if d is None:
                return await fn(*args, **kwargs)
            events, behavior, delay, answer = d
            _tell(on_event, events)
            if behavior is not None:
                behavior()
            if delay is not None:
                await _pause(sleep, delay)
            if answer is None:
                return await fn(*args, **kwargs)
            if answer[0] == "hang":
                await asyncio.get_running_loop().create_future()  # never answers
            return _injected(answer)

        return attempt_async

    pause_sync = time.sleep if sleep is None else sleep

    @functools.wraps(fn)
    def attempt(*args, **kwargs):  # type: ignore[no-untyped-def]
        d = decide()
        if d is None:
            return fn(*args, **kwargs)
        events, behavior, delay, answer = d
        _tell(on_event, events)
        if behavior is not None:
            behavior()
        if delay is not None:
            pause_sync(delay)
        if answer is None:
            return fn(*args, **kwargs)
        if answer[0] == "hang":
            threading.Event().wait()  # never answers: a timer above abandons this thread
        return _injected(answer)

    return attempt


def _replayed(fn: Any, tl: Any, sleep: Any, is_async: bool, on_event: Any) -> Any:
    """``fn`` with each attempt meeting the timeline's faults: held by a partition, answered by an
    outage (a 503, or a hang) or a throttle (a 429 with its Retry-After), stretched by a latency
    inflation, a success failed (a 500) by an error rate. Each is told to ``on_event`` as the
    Rust ``TimelineLayer`` reports it: an answer as ``Chaos.OnFault``, a hold or a stretch as
    ``Chaos.OnLatency``."""

    def tell(event: str, n: int, delay: float | None) -> None:
        if on_event is not None:
            on_event("chaos", {"event": event, "attempt": n, "delay": delay})

    if is_async:

        @functools.wraps(fn)
        async def attempt_async(*args, **kwargs):  # type: ignore[no-untyped-def]
            n, action = tl._send()
            while action[0] == "hold":
                tell("Chaos.OnLatency", n, action[1])
                await _pause(sleep, action[1])
                n, action = tl._send(n)
            if action[0] != "send":
                tell("Chaos.OnFault", n, None)
                if action[0] == "hang":
                    await asyncio.get_running_loop().create_future()  # never answers
                return _injected(action)
            sent = tl._elapsed()
            outcome = await _attempt(fn, args, kwargs)
            if action[1] > 1.0:
                extra = (tl._elapsed() - sent) * (action[1] - 1.0)
                tell("Chaos.OnLatency", n, extra)
                await _pause(sleep, extra)
            while True:
                at = tl._answer(n, outcome[0])
                if at[0] == "deliver":
                    break
                if at[0] == "hold":
                    tell("Chaos.OnLatency", n, at[1])
                    await _pause(sleep, at[1])
                    continue
                tell("Chaos.OnFault", n, None)
                return _injected(at)
            if outcome[0]:
                return outcome[1]
            raise outcome[1]

        return attempt_async

    pause_sync = time.sleep if sleep is None else sleep

    @functools.wraps(fn)
    def attempt(*args, **kwargs):  # type: ignore[no-untyped-def]
        n, action = tl._send()
        while action[0] == "hold":
            tell("Chaos.OnLatency", n, action[1])
            pause_sync(action[1])
            n, action = tl._send(n)
        if action[0] != "send":
            tell("Chaos.OnFault", n, None)
            if action[0] == "hang":
                threading.Event().wait()  # never answers: a timer above abandons this thread
            return _injected(action)
        sent = tl._elapsed()
        outcome = _call(fn, args, kwargs)
        if action[1] > 1.0:
            extra = (tl._elapsed() - sent) * (action[1] - 1.0)
            tell("Chaos.OnLatency", n, extra)
            pause_sync(extra)
        while True:
            at = tl._answer(n, outcome[0])
            if at[0] == "deliver":
                break
            if at[0] == "hold":
                tell("Chaos.OnLatency", n, at[1])
                pause_sync(at[1])
                continue
            tell("Chaos.OnFault", n, None)
            return _injected(at)
        if outcome[0]:
            return outcome[1]
        raise outcome[1]

    return attempt


# --- Helpers ---------------------------------------------------------------------------------


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


# --- Driving the engine ----------------------------------------------------------------------


class _State:
    """What one call's driver learnt: attempts sent, why it stopped."""

    __slots__ = ("attempts", "reason")

    def __init__(self) -> None:
        self.attempts = 0
        self.reason: str | None = None


# The state of a call nobody reads (no ``on_call``): one for all such calls, written and never read.
_UNREAD = _State()


class _Refused(Exception):
    """The engine refused the call locally: ``error`` is what the caller gets without on_open."""

    def __init__(self, error: CircuitOpenError) -> None:
        super().__init__(str(error))
        self.error = error


def _refusal(by: str, retry_after: float | None, last: BaseException | None) -> CircuitOpenError:
    """The error a local refusal raises: ``CircuitOpenError`` for the breaker, else
    ``RefusedError``; ``last`` is the answer that opened the breaker, when it did."""
    after = None if retry_after is None or retry_after < 0 else retry_after
    error = CircuitOpenError(after) if by == "breaker" else RefusedError(by, after)
    error.last = last  # type: ignore[attr-defined]
    if last is not None:
        error.__cause__ = last
    return error


def _dispatch(run: Any, on_event: Any) -> None:
    """Hands the engine's events to ``on_event`` (only a run started listening keeps them)."""
    if on_event is not None:
        for name, fields in run.events():
            on_event(name, fields)


def _feed(run: Any, n: int, outcome: tuple[bool, Any], values: dict[int, Any],
          errors: dict[int, BaseException], classify: Any) -> None:
    """Hands copy ``n``'s outcome to the engine: a value, or an exception read by ``classify``."""
    ok, value = outcome
    if ok:
        values[n] = value
        run.answer(n)
        return
    if isinstance(value, SpendLimitError) or not isinstance(value, Exception):
        raise value  # not the downstream's answer: the call is over (cancelled)
    kind, hint = classify(value)
    errors[n] = value
    run.answer(n, kind, hint)


def _finish(action: tuple[Any, ...], values: dict[int, Any], errors: dict[int, BaseException],
            timeouts: dict[int, float | None], state: _State) -> Any:
    """The engine's ``done``: the winning copy's value, or what the call raises."""
    _, result, detail, attempts, last_n, retry_after, reason = action
    state.attempts = attempts
    state.reason = reason or None
    if result == "ok":
        return values.pop(detail)
    last = errors.get(last_n) if last_n is not None else None
    if result == "refused":
        raise _Refused(_refusal(detail, retry_after, last))
    if result == "gave-up":
        if last is not None:
            raise last
        timeout = timeouts.get(last_n) if last_n is not None else None
        raise TimeoutError(
            "attempt timed out" if timeout is None else f"attempt timed out after {timeout:g}s"
        )
    raise asyncio.CancelledError()


def _call(fn: Any, args: Any, kwargs: Any) -> tuple[bool, Any]:
    try:
        return (True, fn(*args, **kwargs))
    except Exception as exc:
        return (False, exc)


def _in_thread(n: int, fn: Any, args: Any, kwargs: Any,
               answers: queue.SimpleQueue[tuple[int, tuple[bool, Any]]]) -> None:
    """Runs copy ``n`` in a daemon thread; its outcome is put on ``answers``."""
    def work() -> None:
        try:
            outcome = _call(fn, args, kwargs)
        except BaseException as exc:  # handed to the caller's thread
            outcome = (False, exc)
        answers.put((n, outcome))

    threading.Thread(target=work, name=f"reliable-copy-{n}", daemon=True).start()


def _drive_sync(policy: Any, fn: Any, args: Any, kwargs: Any, sleep: Any, classify: Any,
                on_event: Any, state: _State, uninterruptible: bool = False) -> Any:
    """One call, the engine deciding, in the caller's thread.

    A copy runs in the caller's thread, unless it has a timer (it then runs in a daemon thread
    the caller stops waiting for: Python cannot stop a thread, so a timed-out attempt keeps
    running in the background, as in reliablekit 0.1) or the policy hedges (every copy in a
    daemon thread, so a hedge can go out while the first is still running).

    ``uninterruptible`` (never with a policy that hedges): every copy runs in the caller's
    thread, timer or not, and its answer is handed to the engine when it comes; the engine takes
    an answer after the copy's deadline as it is (it times a copy out only when woken past it,
    and nothing wakes it while the copy runs).
    """
    run = policy.start(on_event is not None)
    hedges = policy.hedges
    # Made with the first copy run in a thread: a call whose copies all run inline (no timer, no
    # hedging: the common case) makes neither.
    answers: queue.SimpleQueue[tuple[int, tuple[bool, Any]]] | None = None
    in_flight: set[int] | None = None
    values: dict[int, Any] = {}
    errors: dict[int, BaseException] = {}
    timeouts: dict[int, float | None] = {}
    delay = None  # the retry wait decided last, slept when nothing is in flight
    try:
        while True:
            if on_event is not None:
                _dispatch(run, on_event)
            inline = None
            for action in run.poll():
                kind = action[0]
                if kind == "send":
                    n, timeout = action[1], action[2]
                    timeouts[n] = timeout
                    if not uninterruptible and (hedges or timeout is not None):
                        if answers is None or in_flight is None:
                            answers, in_flight = queue.SimpleQueue(), set()
                        in_flight.add(n)
                        _in_thread(n, fn, args, kwargs, answers)
                    else:
                        inline = n
                elif kind == "retry":
                    if action[1] > 0:
                        delay = action[1]
                    else:
                        sleep(0.0)  # a retry at once: ``sleep`` still hears of it, as in 0.1
                elif kind == "cancel":
                    if in_flight is not None:
                        in_flight.discard(action[1])
                else:
                    return _finish(action, values, errors, timeouts, state)
            if inline is not None:
                try:
                    outcome = (True, fn(*args, **kwargs))
                except Exception as exc:
                    outcome = (False, exc)
                _feed(run, inline, outcome, values, errors, classify)
                continue
            wait = run.wait()
            if in_flight and answers is not None:
                try:
                    n, outcome = answers.get(timeout=wait)
                except queue.Empty:
                    run.woke()  # waited the time asked: a copy's timer or a hedge is due
                    continue
                if n in in_flight:  # else a copy the engine cancelled: its answer is dropped
                    in_flight.discard(n)
                    _feed(run, n, outcome, values, errors, classify)
            elif wait is not None:
                # The retry's wait, slept by ``sleep`` (the decided delay, not what is left of
                # it); the engine then moves on as if that much time passed.
                sleep(wait if delay is None else delay)
                delay = None
                run.woke()
            else:  # the engine always has a copy out, a timer, or an end
                raise RuntimeError("reliable: the call engine is waiting for nothing")
    except BaseException:
        run.cancel()
        _dispatch(run, on_event)
        state.attempts = run.attempts
        raise


async def _attempt(fn: Any, args: Any, kwargs: Any) -> tuple[bool, Any]:
    try:
        return (True, await fn(*args, **kwargs))
    except Exception as exc:
        return (False, exc)


async def _drive_async(policy: Any, fn: Any, args: Any, kwargs: Any, pause: Any, classify: Any,
                       on_event: Any, state: _State, uninterruptible: bool = False) -> Any:
    """One call, the engine deciding. A copy with no timer of a policy that does not hedge is
    awaited in the caller's task; any other copy is an asyncio task (hedges race as tasks; a copy
    that times out or loses is cancelled). ``uninterruptible`` (never with a policy that hedges):
    every copy is awaited in the caller's task, its answer taken when it comes."""
    run = policy.start(on_event is not None)
    hedges = policy.hedges
    tasks: dict[int, asyncio.Future[tuple[bool, Any]]] = {}
    values: dict[int, Any] = {}
    errors: dict[int, BaseException] = {}
    timeouts: dict[int, float | None] = {}
    dropped: list[asyncio.Future[tuple[bool, Any]]] | None = None  # made with the first one
    delay = None  # the retry wait decided last, slept when nothing is in flight
    try:
        while True:
            if on_event is not None:
                _dispatch(run, on_event)
            inline = None
            for action in run.poll():
                kind = action[0]
                if kind == "send":
                    n, timeout = action[1], action[2]
                    timeouts[n] = timeout
                    if not uninterruptible and (hedges or timeout is not None):
                        tasks[n] = asyncio.ensure_future(_attempt(fn, args, kwargs))
                    else:
                        inline = n
                elif kind == "retry":
                    if action[1] > 0:
                        delay = action[1]
                    else:
                        await pause(0.0)  # a retry at once: ``sleep`` still hears of it, as in 0.1
                elif kind == "cancel":
                    task = tasks.pop(action[1], None)
                    if task is not None:
                        task.cancel()
                        if dropped is None:
                            dropped = []
                        dropped.append(task)
                else:
                    if dropped:  # their cancellation has run when the call returns
                        await asyncio.wait(dropped)
                    return _finish(action, values, errors, timeouts, state)
            if inline is not None:
                try:
                    outcome = (True, await fn(*args, **kwargs))
                except Exception as exc:
                    outcome = (False, exc)
                _feed(run, inline, outcome, values, errors, classify)
                continue
            wait = run.wait()
            if tasks:
                done, _ = await asyncio.wait(
                    set(tasks.values()), timeout=wait, return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    run.woke()  # waited the time asked: a copy's timer or a hedge is due
                    continue
                # One answer at a time, in send order: the engine may cancel the others.
                n = min(k for k, t in tasks.items() if t in done)
                _feed(run, n, tasks.pop(n).result(), values, errors, classify)
            elif wait is not None:
                # The retry's wait, slept by ``sleep`` (the decided delay, not what is left of
                # it); the engine then moves on as if that much time passed.
                await pause(wait if delay is None else delay)
                delay = None
                run.woke()
            else:  # the engine always has a copy out, a timer, or an end
                raise RuntimeError("reliable: the call engine is waiting for nothing")
    except BaseException:
        for task in tasks.values():
            task.cancel()
        run.cancel()
        _dispatch(run, on_event)
        state.attempts = run.attempts
        raise


# --- The decorator ---------------------------------------------------------------------------

_RETRY_DEFAULTS = {
    "max_attempts": 5, "base_delay": 0.2, "factor": 2.0, "jitter": 0.1, "max_delay": None,
    "retry_after_cap": 60.0, "breaker": None, "budget": None, "timeout": None, "rng": None,
    "clock": None,
}


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
    policy: Policy | None = None,
    on_event: Any = None,
    clock: Any = None,
    chaos: Chaos | ChaosTimeline | None = None,
    uninterruptible: bool = False,
) -> Any:
    """Wraps ``fn`` (sync or ``async def``) in timeout + jittered exponential backoff + breaker.

    Usable as ``@reliable``, ``@reliable(...)`` or ``reliable(fn, ...)``. Each attempt asks the
    breaker first; while it is open the call is not made: ``on_open(*args, **kwargs)`` answers
    instead, or ``CircuitOpenError`` is raised. A failed attempt is retried after
    ``base_delay * factor**(n-1)`` seconds spread by ±``jitter`` (longer if the server sent a
    ``Retry-After``, up to ``retry_after_cap``), at most ``max_attempts`` attempts in all, and
    only while ``budget`` allows. When it gives up, the last exception is raised.

    ``policy`` (a ``Policy``, e.g. ``Policy.from_file("policy.json")``) replaces the retry
    arguments (``breaker``, ``timeout``, ``max_attempts``, ``base_delay``, ``factor``,
    ``jitter``, ``rng``, ``budget``, ``max_delay``, ``retry_after_cap``: give them to the
    policy, not beside it) with a whole policy stack: deadline, throttle, ledger, hedging,
    limits. Each function decorated with a ``Policy`` is one client of it, as a service a Rust
    tower layer wraps or a function the npm package wraps with a ``Policy``: a layer whose
    ``scope`` (a ``Retry``'s budget: ``budget_scope``) is ``Shared`` keeps one state for every
    function decorated with that ``Policy``; a ``PerClient`` layer (the policy format's default)
    keeps one per decorated function. ``on_event(name, fields)`` hears each
    decision as it is taken (``retry``, ``refused``, ``hedge``, ``answer``, ``breaker``, ...).
    ``clock()`` (seconds) times the retries and timers; by default the breaker's clock, else the
    monotonic clock.

    With ``spend``, each attempt first reserves ``estimate(*args, **kwargs)`` = ``(input_tokens,
    max_output_tokens)`` under the spend budget's ceilings, then settles ``usage(result)`` (the
    estimate when ``usage`` is None); a failed or cancelled attempt is charged its whole
    estimate. A call that does not fit is answered like an open breaker (``on_open``, or
    ``SpendLimitError``) and not retried.

    With ``chaos`` (a ``Chaos``, or a ``ChaosTimeline`` from a scenario file), every attempt
    first meets the chaos layer, below the retry and the breaker, where a real answer comes
    from: an injected status is raised as a ``ChaosError`` (``classify`` reads it through the
    core's answer table like a real one), a reset as ``ConnectionResetError``, a hang never
    answers; each injection is told to ``on_event`` as ``("chaos", {"event": "Chaos.OnFault",
    ...})``.

    ``uninterruptible=True`` says the work cannot be stopped at its timer (a blocking call with no
    timeout of its own, an ``await`` of ``asyncio.to_thread`` or ``run_in_executor``): each
    attempt then runs in the caller's thread (an ``async def`` function: awaited in the caller's
    task), never in a thread or task left behind, and no timer stops it; its answer is taken when
    it comes, as it is: a success after ``timeout`` is the call's success (never thrown away and
    retried), a failure after it is read by ``classify`` like any other (an exception that
    carries an HTTP answer, by the core's answer table). So a slow attempt is never running while
    its retry loads the service too; the price is that ``timeout`` (and a policy's deadline) no
    longer bounds how long an attempt takes: give the work its own timeout. Without it (the
    default), a sync function with a timer runs in a daemon thread the caller stops waiting for
    at the timer (the thread runs on: Python cannot stop it), and an ``async def`` attempt is a
    task cancelled at its timer. A policy that hedges is refused with it (a hedge races the
    attempt it copies; an uninterruptible attempt runs alone until it answers), and a chaos
    ``hang`` then hangs the call, as a hung blocking call does.
    """
    _check_callable("sleep", sleep)
    _check_callable("on_open", on_open)
    _check_callable("classify", classify)
    _check_callable("on_call", on_call)
    _check_callable("estimate", estimate)
    _check_callable("usage", usage)
    _check_callable("on_event", on_event)
    if not isinstance(uninterruptible, bool):
        raise TypeError(f"uninterruptible: must be a bool, got {type(uninterruptible).__name__}")
    if chaos is not None and not isinstance(chaos, (Chaos, ChaosTimeline)):
        raise TypeError(f"chaos: must be a Chaos, a ChaosTimeline or None, got {type(chaos).__name__}")
    if spend is not None:
        if not isinstance(spend, SpendBudget):
            raise TypeError(f"spend: must be a SpendBudget or None, got {type(spend).__name__}")
        if estimate is None:
            raise TypeError("estimate: a spend budget needs estimate(*args, **kwargs) -> (input, max_output)")
    if policy is not None:
        if not isinstance(policy, Policy):
            raise TypeError(f"policy: must be a Policy or None, got {type(policy).__name__}")
        given = dict(
            max_attempts=max_attempts, base_delay=base_delay, factor=factor, jitter=jitter,
            max_delay=max_delay, retry_after_cap=retry_after_cap, breaker=breaker,
            budget=budget, timeout=timeout, rng=rng, clock=clock,
        )
        for name, value in given.items():
            default = _RETRY_DEFAULTS[name]
            if value is not default and value != default:
                raise TypeError(f"{name}: the policy decides it; set it in the policy, not beside it")
        if uninterruptible and policy.hedges:
            raise TypeError(
                "uninterruptible: the policy hedges, and a hedge must race the attempt it copies; "
                "an uninterruptible attempt runs alone until it answers: use a policy without a "
                "Hedge layer, or leave uninterruptible out"
            )
        # Each function decorated is one client of the policy: its PerClient layers its own, its
        # Shared layers the Policy's.
        client = policy._client
        max_attempts = 2  # for served_by: a policy may retry
    else:
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
            raise TypeError(f"max_attempts: must be an int, got {type(max_attempts).__name__}")
        engine = _seed_policy(
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
            clock=clock,
        )

        # The seed's arguments: every function decorated with them runs through the breaker and
        # budget given, whatever shares them.
        def client() -> Policy:
            return engine

    def decorate(f: Any) -> Any:
        if not callable(f):
            raise TypeError(f"fn: must be callable, got {type(f).__name__}")
        is_async = _is_async(f)
        make = _async_wrapper if is_async else _sync_wrapper
        attempt = f if spend is None else _spending(f, spend, estimate, usage, is_async)
        if chaos is not None:
            attempt = _chaotic(attempt, chaos, sleep, is_async, on_event)
        runs = client()
        wrapper = make(
            attempt, runs, sleep, on_open, classify, on_call, on_event, _name(f), uninterruptible
        )
        wrapper = functools.wraps(f)(wrapper)
        # The layers this wrapper adds, innermost first: the breaker guards each attempt.
        served_by = _name(f)
        if runs.breaker is not None:
            served_by = f"breaker({served_by})"
        if max_attempts > 1:
            served_by = f"retry({served_by})"
        setattr(wrapper, "__served_by__", served_by)  # an attribute functools.wraps does not type
        return wrapper

    if fn is None:
        return decorate
    return decorate(fn)


def _sync_wrapper(fn, policy, sleep, on_open, classify, on_call, on_event, name, uninterruptible):  # type: ignore[no-untyped-def]
    sleep = sleep if sleep is not None else time.sleep

    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        began = time.perf_counter() if on_call is not None else 0.0
        state = _State() if on_call is not None else _UNREAD
        try:
            result = _drive_sync(
                policy, fn, args, kwargs, sleep, classify, on_event, state, uninterruptible
            )
        except (_Refused, SpendLimitError) as refused:
            if isinstance(refused, SpendLimitError):
                state.reason = "cancelled"
            if on_call is not None:
                on_call(_record(name, state, began, "rejected" if on_open is None else "fallback"))
            if on_open is not None:
                return on_open(*args, **kwargs)
            if isinstance(refused, _Refused):
                raise refused.error from refused.error.__cause__
            raise
        except Exception:
            if on_call is not None:
                on_call(_record(name, state, began, "failure"))
            raise
        except BaseException:
            state.reason = state.reason or "cancelled"
            if on_call is not None:
                on_call(_record(name, state, began, "cancelled"))
            raise
        if on_call is not None:
            on_call(_record(name, state, began, "success"))
        return result

    return wrapper


def _async_wrapper(fn, policy, sleep, on_open, classify, on_call, on_event, name, uninterruptible):  # type: ignore[no-untyped-def]
    pause = functools.partial(_pause, sleep)

    async def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        began = time.perf_counter() if on_call is not None else 0.0
        state = _State() if on_call is not None else _UNREAD
        try:
            result = await _drive_async(
                policy, fn, args, kwargs, pause, classify, on_event, state, uninterruptible
            )
        except (_Refused, SpendLimitError) as refused:
            if isinstance(refused, SpendLimitError):
                state.reason = "cancelled"
            if on_call is not None:
                on_call(_record(name, state, began, "rejected" if on_open is None else "fallback"))
            if on_open is not None:
                answer = on_open(*args, **kwargs)
                return await answer if inspect.isawaitable(answer) else answer
            if isinstance(refused, _Refused):
                raise refused.error from refused.error.__cause__
            raise
        except Exception:
            if on_call is not None:
                on_call(_record(name, state, began, "failure"))
            raise
        except BaseException:
            # Cancelled (asyncio.timeout, TaskGroup, task.cancel()) or interrupted: the engine
            # gave every permit back uncounted, so a cancelled half-open probe frees its slot.
            state.reason = state.reason or "cancelled"
            if on_call is not None:
                on_call(_record(name, state, began, "cancelled"))
            raise
        if on_call is not None:
            on_call(_record(name, state, began, "success"))
        return result

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


def _record(name: str, state: _State, began: float, outcome: str) -> CallRecord:
    return CallRecord(name, state.attempts, time.perf_counter() - began, outcome, state.reason)


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
