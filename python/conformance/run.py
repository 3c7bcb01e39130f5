"""The Python face of the cross-face conformance suite.

    python conformance/run.py SEQUENCES_DIR [--traces DIR] [--out DIR]

Feeds each scripted sequence (format 1 of the suite's ``conformance/README.md``) through the
installed ``reliable`` package's public API, in virtual time, and writes the decision trace (JSON
lines). With ``--traces`` it compares each trace with the expected one byte for byte, prints the
first differing line of each sequence that differs, and exits 1 if any does.

Each sequence's policy block is written as a policy file (JSON, the policy format the simulator
runs: the layers nested as the block's ``nesting`` says, by default
``Ledger(Retry(Throttle(Breaker(Limit(RateLimit(Hedge(Call)))))))`` without the layers the block
leaves out, as the suite's engine face writes it), loaded with ``reliable.Policy.from_json``
and run by ``@reliable(policy=...)`` around an ``async def`` scripted downstream, on an asyncio
event loop whose clock is virtual: when nothing is ready it jumps to the next timer, on the next
whole millisecond (a millisecond timer, as the Rust faces' tokio timers). The throttle's draws are
the policy's ``rng``. The trace is what the API reports: ``on_event`` (the engine's decisions and
the breaker's transitions), each call of the downstream (an attempt sent) and ``on_call`` (the
call's end).

A sequence whose policy is ``uninterruptible`` (an attempt that cannot be stopped at its timer)
runs through ``@reliable(policy=..., uninterruptible=True)`` around a *sync* scripted downstream
instead: each attempt runs in the caller's thread, its latency passing on the same virtual clock
while it runs (nothing can stop it), the waits between attempts slept by the decorator's ``sleep``
on that clock; its answer is taken when it comes. Every sequence runs: none is listed.

The sequences of ``python/conformance/sequences`` are the seed's API (``reliable(...)`` with its
own arguments, no policy file): each has ``"seed_api": true`` and runs through those arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import threading
from pathlib import Path
from typing import Any

import reliable
from reliable import CallRecord, CircuitBreaker, Policy, RetryBudget


class Unsupported(Exception):
    """The sequence cannot be run by this face, for the reason given."""


class RunnerError(BaseException):
    """The sequence is invalid or ran out of answers: the face fails. A BaseException, so that
    the decorator neither retries it nor counts it (the engine cancels the call)."""


class HTTPError(Exception):
    """A scripted non-2xx answer, shaped like an httpx/requests error (``.response``)."""

    def __init__(self, status: int, headers: dict[str, str]) -> None:
        super().__init__(f"HTTP {status}")
        self.response = _Response(status, headers)


class _Response:
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status_code = status
        self.headers = {k.lower(): v for k, v in headers.items()}


# --- virtual time ---------------------------------------------------------------------------


class _VirtualSelector:
    """The loop's selector, never waiting: with nothing ready, the loop's clock jumps to its
    next timer, on the next whole millisecond."""

    def __init__(self, loop: VirtualLoop, real: Any) -> None:
        self._loop = loop
        self._real = real

    def select(self, timeout: float | None = None) -> Any:
        events = self._real.select(0)
        if events or timeout == 0:
            return events
        timers = [h.when() for h in self._loop._scheduled if not h.cancelled()]  # type: ignore[attr-defined]
        if not timers:
            raise RunnerError("virtual time: nothing is ready and no timer is set (stuck)")
        self._loop.ms = max(self._loop.ms, math.ceil(round(min(timers) * 1000, 6)))
        return events

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop on a virtual clock of whole milliseconds."""

    def __init__(self) -> None:
        super().__init__()
        self.ms = 0
        self._selector = _VirtualSelector(self, self._selector)  # type: ignore[has-type]

    def time(self) -> float:
        return self.ms / 1000


# --- the policy block as a policy file ------------------------------------------------------


def _d(ms: int) -> str:
    return f"{ms}ms"


def _backoff(b: dict[str, Any]) -> dict[str, Any]:
    cap = b.get("cap_ms")
    return {
        "shape": {"Exponential": {"base": _d(b["base_ms"]), "factor": b["factor"]}},
        "cap": None if cap is None else _d(cap),
        "jitter": "None",
        "first_exponent": 0,
    }


def _limit(block: dict[str, Any]) -> dict[str, Any]:
    if block.get("max_in_flight") is not None:
        n = block["max_in_flight"]
        return {"rule": "Fixed", "initial": n, "min": n, "max": n}
    if block.get("aimd") is not None:
        a = block["aimd"]
        rule = {"Aimd": {"backoff": a["backoff"], "increase": a["increase"]}}
        return {"rule": rule, "initial": a["initial"], "min": a["min"], "max": a["max"]}
    g = block["gradient"]
    rule = {"Gradient": {k: g[k] for k in ("tolerance", "smoothing", "long_window", "queue")}}
    return {"rule": rule, "initial": g["initial"], "min": g["min"], "max": g["max"]}


# The stock nesting, outermost first (conformance/src/lib.rs, ``STOCK_ORDER``).
STOCK_ORDER = ("ledger", "retry", "throttle", "breaker", "limit", "rate_limit")


def policy_json(p: dict[str, Any]) -> str:
    """The policy block as a policy file: the layers nested as its ``nesting`` says (by default
    in the engine's stock order), each one per client."""
    scope = "PerClient"
    hedge = p.get("hedge")
    copy_timeout = None if hedge is None else hedge.get("copy_timeout_ms")
    layer: dict[str, Any] = {
        "Call": {"downstream": "conformance", "timeout": None if copy_timeout is None else _d(copy_timeout)}
    }
    if hedge is not None:
        if hedge.get("quantile") is not None:
            q = hedge["quantile"]
            delay: Any = {"Quantile": {
                "quantile": q["q"], "window": q["window"], "min_samples": q["min_samples"],
                "min": _d(q["min_ms"]), "max": _d(q["max_ms"]),
            }}
        else:
            delay = {"Fixed": _d(hedge.get("delay_ms") or 0)}
        config = {"delay": delay, "max_hedges": hedge["max_hedges"]}
        layer = {"Hedge": {"config": config, "idempotent": bool(p.get("idempotent")), "scope": scope, "inner": layer}}
    # Each layer the block sets, as a function of its inner layer; nested as ``nesting`` says
    # (outermost first), by default in the stock order without those the block leaves out.
    wraps: dict[str, Any] = {}

    def wrap(kind: str, body: dict[str, Any]) -> Any:
        return lambda inner: {kind: {**body, "inner": inner}}

    if p.get("rate_limit") is not None:
        r = p["rate_limit"]
        config = {"rate": r["rate"], "period": _d(r["period_ms"]), "burst": r["burst"]}
        wraps["rate_limit"] = wrap("RateLimit", {"config": config, "scope": scope})
    if p.get("limit") is not None:
        wraps["limit"] = wrap("Limit", {"config": _limit(p["limit"]), "scope": scope})
    if p.get("breaker") is not None:
        b = p["breaker"]
        config = {
            "consecutive_failures": b["consecutive_failures"],
            "open": {"duration": _d(b["open_ms"]), "growth": 1.0, "jitter": 0.0},
            "half_open": {
                "max_in_flight": 1,
                "rule": {"Consecutive": {"successes": b["half_open_successes"]}},
                "probe_timeout": "18446744073.709551615s",
            },
        }
        wraps["breaker"] = wrap("Breaker", {"config": config, "scope": scope})
    if p.get("throttle") is not None:
        t = p["throttle"]
        config = {"k": t["k"], "window": _d(t["window_ms"]), "buckets": t["buckets"],
                  "max_rejection": t.get("max_rejection")}
        wraps["throttle"] = wrap("Throttle", {"config": config, "scope": scope})
    retry = {
        "max_attempts": p["max_attempts"],
        "attempt_timeout": None if p["attempt_timeout_ms"] is None else _d(p["attempt_timeout_ms"]),
        "deadline": None if p["deadline_ms"] is None else _d(p["deadline_ms"]),
        "backoff": _backoff(p["backoff"]),
        "throttled_backoff": None if p["throttled_backoff"] is None else _backoff(p["throttled_backoff"]),
        "max_server_delay": _d(p["max_server_delay_ms"]),
        "retry_timeouts": p["retry_timeouts"],
        "wait_on_refusal": p["wait_on_refusal"],
    }
    budget = None
    if p.get("budget") is not None:
        if set(p["budget"]) != {"token_bucket"}:
            raise RunnerError(f"budget {sorted(p['budget'])}: format 1 knows only token_bucket")
        tb = p["budget"]["token_bucket"]
        budget = {"TokenBucket": {
            "max_tokens": tb["max_tokens"], "initial_tokens": None, "first_try_credit": 0.0,
            "success_credit": tb["success_credit"], "retried_success_credit": None,
            "failure_cost": tb["failure_cost"], "retry_cost": tb["retry_cost"],
            "retry_when": {"AtLeast": tb["retry_cost"]},
        }}
    wraps["retry"] = wrap("Retry", {"policy": retry, "budget": budget, "budget_scope": scope})
    if p.get("ledger") is not None:
        lg = p["ledger"]
        config = {"ratio": lg["ratio"], "min_per_sec": lg["min_per_sec"], "ttl": _d(lg["ttl_ms"]), "slots": 10}
        wraps["ledger"] = wrap("Ledger", {"config": config, "scope": scope})
    order = p.get("nesting")
    if order is None:
        order = [name for name in STOCK_ORDER if name in wraps]
    for name in reversed(order):
        if name not in wraps:
            raise RunnerError(f"nesting: {name!r} is not set in the policy block")
        layer = wraps[name](layer)
    return json.dumps({"name": "conformance", "stack": layer})


def _hangs(block: dict[str, Any] | None) -> bool:
    """Whether a ``chaos`` block can inject a hang (a ``timeout`` transport)."""
    return block is not None and any(
        (block.get(s) or {}).get("transport") == "timeout" for s in ("fault", "outcome")
    )


def chaos_of(block: dict[str, Any] | None) -> Any:
    """The policy block's ``chaos`` (the suite's README) as a ``reliable.Chaos``: each strategy's
    rate, seed and switch, its status with ``retry_after_ms`` and ``should_retry``, or a
    transport failure (``reset``; ``timeout``: a hang)."""
    if block is None:
        return None
    args: dict[str, Any] = {}
    for strategy in ("fault", "outcome"):
        b = block.get(strategy)
        if b is None:
            continue
        unknown = set(b) - {"rate", "seed", "enabled", "status", "retry_after_ms", "should_retry", "transport"}
        if unknown:
            raise RunnerError(f"chaos.{strategy}: unknown fields {sorted(unknown)}")
        spec: dict[str, Any] = {"rate": b["rate"], "seed": b["seed"], "enabled": b.get("enabled", True)}
        if b.get("status") is not None:
            spec["status"] = b["status"]
            if b.get("retry_after_ms") is not None:
                spec["retry_after"] = b["retry_after_ms"] / 1000
            if b.get("should_retry") is not None:
                spec["should_retry"] = b["should_retry"]
        elif b.get("transport") == "reset":
            spec["reset"] = True
        else:
            spec["hang"] = True
        args[strategy] = spec
    if block.get("latency") is not None:
        lat = block["latency"]
        args["latency"] = {"rate": lat["rate"], "seed": lat["seed"], "enabled": lat.get("enabled", True),
                           "delay": lat["delay_ms"] / 1000}
    unknown = set(block) - {"fault", "outcome", "latency"}
    if unknown:
        raise RunnerError(f"chaos: unknown strategies {sorted(unknown)}")
    return reliable.Chaos(**args, name="conformance")


# --- the face -------------------------------------------------------------------------------


class Face:
    """One sequence run through the public API in virtual time."""

    def __init__(self, sequence: dict[str, Any], load: Any = None, cyclic: bool = False) -> None:
        """``load(clock, rng)``, when given, is the policy (else the sequence's block written as
        a policy file); ``cyclic``: the draws start again when all are taken."""
        if sequence.get("format") != 1:
            raise RunnerError(f"format {sequence.get('format')!r}: this runner reads format 1")
        self.policy = sequence["policy"]
        # Work no timer can stop: a sync downstream run in the caller's thread, on the virtual
        # clock, waits slept on it too.
        self.uninterruptible = bool(self.policy.get("uninterruptible"))
        self.calls = sequence["calls"]
        self.loop = VirtualLoop()
        self.call = 0
        self.lines: list[str] = []
        self.answers: list[dict[str, Any]] = []
        self.sent = 0
        throttle = self.policy.get("throttle")
        self.draws = list(throttle["draws"]) if throttle is not None else []
        self.draws = list(sequence.get("draws", self.draws))
        self.cyclic = cyclic
        self.taken = 0
        self.exhausted = False
        self.caller = threading.get_ident()  # the thread the calls are made in
        self.chaos = chaos_of(self.policy.get("chaos"))
        if self.uninterruptible and _hangs(self.policy.get("chaos")):
            raise RunnerError("uninterruptible with a chaos hang: the call would wait for it forever")
        downstream: Any = self._downstream
        blocking: dict[str, Any] = {}
        if self.uninterruptible:
            downstream = self._downstream_sync
            blocking = {"uninterruptible": True, "sleep": self._sleep}
        if load is not None:
            self.function = reliable.reliable(
                downstream, policy=load(self.loop.time, self._draw),
                on_event=self._event, on_call=self._end, **blocking,
            )
        elif sequence.get("seed_api"):
            self.function = self._seed_api()
        else:
            policy = Policy.from_json(
                policy_json(self.policy), file=f"{sequence.get('name')}.json",
                clock=self.loop.time, rng=self._draw,
            )
            self.function = reliable.reliable(
                downstream, policy=policy, on_event=self._event, on_call=self._end,
                chaos=self.chaos, **blocking,
            )

    def _seed_api(self) -> Any:
        """The seed's arguments: ``max_attempts``, ``backoff`` (``base_delay``, ``factor``,
        ``max_delay``, ``jitter=0``), ``max_server_delay_ms`` (``retry_after_cap``), the token
        bucket (``RetryBudget.token_bucket``), the breaker
        ``CircuitBreaker(failure_rate=1.0, window=n, cooldown=open_ms, probe=k, probe_limit=1)``
        (a full window of the last n calls that all failed is n failures in a row), the attempt
        timeout (``timeout``), the virtual clock (``clock``)."""
        p = self.policy
        for field in ("deadline_ms", "throttled_backoff", "throttle", "hedge", "ledger", "limit", "rate_limit"):
            if p.get(field) is not None:
                raise RunnerError(f"{field}: a seed-API sequence sets only the seed's arguments")
        breaker = None
        if p.get("breaker") is not None:
            b = p["breaker"]
            breaker = CircuitBreaker(
                failure_rate=1.0, window=b["consecutive_failures"], cooldown=b["open_ms"] / 1000,
                probe=b["half_open_successes"], clock=self.loop.time, probe_limit=1,
                probe_timeout=1e9,
            )
        budget = None
        if p.get("budget") is not None:
            tb = p["budget"]["token_bucket"]
            budget = RetryBudget.token_bucket(
                tb["max_tokens"], retry_cost=tb["retry_cost"], failure_cost=tb["failure_cost"],
                success_credit=tb["success_credit"],
            )
        backoff = p["backoff"]
        cap = backoff.get("cap_ms")
        timeout = p.get("attempt_timeout_ms")
        return reliable.reliable(
            self._downstream_sync if self.uninterruptible else self._downstream,
            breaker=breaker,
            budget=budget,
            timeout=None if timeout is None else timeout / 1000,
            max_attempts=p["max_attempts"],
            base_delay=backoff["base_ms"] / 1000,
            factor=backoff["factor"],
            jitter=0.0,
            max_delay=None if cap is None else cap / 1000,
            retry_after_cap=p["max_server_delay_ms"] / 1000,
            clock=self.loop.time,
            on_event=self._event,
            on_call=self._end,
            **({"uninterruptible": True, "sleep": self._sleep} if self.uninterruptible else {}),
        )

    # --- the trace -------------------------------------------------------------------------

    def emit(self, ev: str, **fields: Any) -> None:
        record = {"t": self.loop.ms, "call": self.call, "ev": ev, **fields}
        self.lines.append(json.dumps(record, separators=(",", ":")))

    def _event(self, name: str, fields: dict[str, Any]) -> None:
        if name == "breaker":
            self.emit("breaker", **{"from": fields["from"], "to": fields["to"]})
        elif name == "answer":
            self.emit("answer", n=fields["n"], **{"class": fields["class"], "accepted": fields["accepted"]})
        elif name in ("refused", "no-hedge"):
            self.emit(name, by=fields["by"])
        elif name in ("hedge", "cancelled"):
            self.emit(name, n=fields["n"])
        elif name == "limit":
            self.emit("limit", **{"from": fields["from"], "to": fields["to"]})
        elif name == "retry":
            self.emit("retry", delay_ms=fields["delay_ms"])
        elif name == "chaos" and fields["event"] in ("Chaos.OnFault", "Chaos.OnOutcome"):
            # The chaos layer answered this attempt: it counts as sent, never reaches the script.
            self.sent += 1
            self.emit("chaos", n=self.sent, event=fields["event"], draw=fields["attempt"])
        elif name == "chaos" and fields["event"] == "Chaos.OnLatency":
            # Delayed: its attempt line comes when it reaches the downstream.
            self.emit("chaos", n=self.sent + 1, event=fields["event"], draw=fields["attempt"],
                      delay_ms=round(fields["delay"] * 1000))

    def _draw(self) -> float:
        if self.cyclic and self.draws:
            self.taken += 1
            return float(self.draws[(self.taken - 1) % len(self.draws)])
        if not self.draws:
            self.exhausted = True
            return 0.0
        return float(self.draws.pop(0))

    # --- the scripted downstream and the hooks ---------------------------------------------

    def _next(self) -> dict[str, Any]:
        """The next scripted answer, its attempt traced."""
        if not self.answers:
            raise RunnerError(f"call {self.call}: script exhausted")
        answer = self.answers.pop(0)
        self.sent += 1
        self.emit("attempt", n=self.sent)
        return answer

    async def _downstream(self) -> str:
        answer = self._next()
        if answer.get("transport") == "timeout":
            await asyncio.get_running_loop().create_future()  # never answers
        await asyncio.sleep(int(answer.get("latency_ms", 0)) / 1000)
        return self._answer(answer)

    def _downstream_sync(self) -> str:
        """The downstream as blocking work (an uninterruptible sequence): it runs in the caller's
        thread, its latency passing on the virtual clock, and ends only when it has answered."""
        # In virtual time a copy run in a thread the caller stops waiting for would answer at
        # once in real time, and look kept: the face must run it in the caller's thread.
        if threading.get_ident() != self.caller:
            raise RunnerError(f"call {self.call}: an uninterruptible attempt ran outside the caller's thread")
        answer = self._next()
        if answer.get("transport") == "timeout":
            raise RunnerError(f"call {self.call}: a blocking attempt that never answers never ends")
        self._sleep(int(answer.get("latency_ms", 0)) / 1000)
        return self._answer(answer)

    def _sleep(self, seconds: float) -> None:
        """A blocking wait on the virtual clock: it ends on the millisecond an asyncio timer set
        now for ``seconds`` would fire."""
        if seconds > 0:
            self.loop.ms = max(self.loop.ms, math.ceil(round((self.loop.time() + seconds) * 1000, 6)))

    def _answer(self, answer: dict[str, Any]) -> str:
        """What the scripted answer is to the caller: a value, or a raised error."""
        transport = answer.get("transport")
        if transport == "reset":
            raise ConnectionResetError("reset")
        if transport is not None:
            raise RunnerError(f"call {self.call}: unknown transport {transport!r}")
        status = int(answer["status"])
        if status < 400:
            return "ok"
        raise HTTPError(status, answer.get("headers") or {})

    def _end(self, record: CallRecord) -> None:
        if record.outcome == "success":
            self.emit("end", result="ok", attempts=record.attempts)
        elif record.outcome in ("rejected", "fallback"):
            self.emit("end", result="refused", attempts=record.attempts)
        elif record.outcome == "failure":
            self.emit("end", result="gave-up", reason=record.reason, attempts=record.attempts)
        else:
            self.emit("end", result=record.outcome, attempts=record.attempts)

    # --- the run ---------------------------------------------------------------------------

    async def _run(self) -> None:
        for i, call in enumerate(self.calls):
            self.call = i
            start = int(call["start_ms"])
            if start > self.loop.ms:
                await asyncio.sleep((start - self.loop.ms) / 1000)
            self.answers = list(call["answers"])
            self.sent = 0
            for strategy, on in (call.get("chaos") or {}).items():
                if self.chaos is None:
                    raise RunnerError(f"call {i}: chaos switches without a chaos block")
                self.chaos.set_enabled(strategy, on)
            try:
                if self.uninterruptible:
                    self.function()  # blocking: its time passes on the virtual clock as it runs
                else:
                    await self.function()
            except RunnerError:
                raise
            except Exception:
                pass  # the call gave up or was refused; its end is in the trace

    def run(self) -> list[str]:
        try:
            self.loop.run_until_complete(self._run())
        finally:
            self.loop.close()
        if self.exhausted:
            raise RunnerError("throttle draws exhausted")
        return self.lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sequences", type=Path)
    parser.add_argument("--traces", type=Path, help="expected traces to compare with")
    parser.add_argument("--out", type=Path, help="where to write the traces")
    args = parser.parse_args()
    files = sorted(args.sequences.glob("*.json"))
    if not files:
        print(f"no sequences in {args.sequences}", file=sys.stderr)
        return 1
    ran, skipped, differ, missing, waiting = [], [], [], [], []
    # Sequences this face does not follow yet (none since it drives the core's engine): each
    # listed one must differ.
    pending_file = args.sequences.parent / "pending.json"
    pending = set()
    if pending_file.exists():
        pending = set(json.loads(pending_file.read_text(encoding="utf-8"))["faces"].get("python", []))
    for path in files:
        sequence = json.loads(path.read_text(encoding="utf-8"))
        name = path.stem
        try:
            lines = Face(sequence).run()
        except Unsupported as why:
            skipped.append(f"{name} ({why})")
            continue
        except (RunnerError, ValueError) as err:
            print(f"FAIL {name}: {err}")
            differ.append(name)
            continue
        ran.append(name)
        text = "".join(line + "\n" for line in lines)
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"{name}.jsonl").write_text(text, encoding="utf-8")
        if args.traces is not None:
            expected_path = args.traces / f"{name}.jsonl"
            if not expected_path.exists():
                missing.append(name)
                continue
            expected = expected_path.read_text(encoding="utf-8").splitlines()
            if name in pending:
                if expected == lines:
                    print(f"FAIL {name}: listed as pending the engine in pending.json, "
                          "but the face now follows it: unlist it")
                    differ.append(name)
                else:
                    waiting.append(name)
                continue
            if expected != lines:
                differ.append(name)
                for k in range(max(len(expected), len(lines))):
                    want = expected[k] if k < len(expected) else "(nothing)"
                    got = lines[k] if k < len(lines) else "(nothing)"
                    if want != got:
                        print(f"DIFF {name} line {k + 1}:\n  want {want}\n  got  {got}")
                        break
    print(f"python face: ran {len(ran)} of {len(files)} sequences: {', '.join(ran) or '-'}")
    for s in skipped:
        print(f"  not run, for a physical reason: {s}")
    if missing:
        print(f"  no expected trace for: {', '.join(missing)}")
    if waiting:
        print(f"  listed in pending.json: {', '.join(waiting)}")
    if args.traces is not None:
        # A sequence that failed before its trace was written is in ``differ``, not in ``ran``.
        same = len([n for n in ran if n not in differ and n not in missing and n not in waiting])
        print(f"{same} passed, {len(differ)} failed")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
