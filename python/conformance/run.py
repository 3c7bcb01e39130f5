"""The Python face of the cross-face conformance suite.

    python conformance/run.py SEQUENCES_DIR [--traces DIR] [--out DIR]

Feeds each scripted sequence (format 1 of the suite's ``conformance/README.md``) through the
installed ``reliable`` package's public API, in virtual time, and writes the decision trace (JSON
lines). With ``--traces`` it compares each trace with the expected one byte for byte, prints the
first differing line of each sequence that differs, and exits 1 if any does.

Only what the seed's API can express is run; every other sequence is listed with the reason:

- ``deadline_ms``: the seed's API has no overall deadline;
- ``throttled_backoff``: one backoff for every class;
- ``retry_timeouts: false``: timeouts are always retried;
- ``wait_on_refusal: true``: an open breaker answers at once (``on_open`` or ``CircuitOpenError``).
- ``throttle``: no adaptive throttle fed scripted draws.

How the policy block maps onto the API: ``max_attempts``, ``backoff`` (``base_delay``,
``factor``, ``max_delay``, ``jitter=0``), ``max_server_delay_ms`` (``retry_after_cap``); the
budget ``{"token_bucket": {...}}`` is ``RetryBudget.token_bucket(max_tokens, retry_cost=,
failure_cost=, success_credit=)``; the breaker ``{consecutive_failures: n, open_ms,
half_open_successes: k}`` is
``CircuitBreaker(failure_rate=1.0, window=n, cooldown=open_ms, probe=k, probe_limit=1)``: a full
window of the last n calls that all failed is n failures in a row. The attempt timeout is the
scripted downstream's: an attempt whose answer would come after its timer raises ``TimeoutError``
at the timer (the seed's ``timeout`` waits in real time, which a virtual-time run cannot use).
``accepted`` is read from the class alone, as the suite's core decides it: a success, a
transient failure (a reset included), a fatal answer and a don't-retry answer were accepted by the
backend; a timeout and a throttled (overload) answer were not.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import reliable
from reliable import CallRecord, CircuitBreaker, CircuitOpenError, RetryBudget


# The classes whose answers the backend was seen to accept (for an adaptive throttle).
ACCEPTED = frozenset({"transient", "fatal", "dont-retry"})


class Unsupported(Exception):
    """The sequence needs something the seed's API cannot express."""


class RunnerError(BaseException):
    """The sequence is invalid or ran out of answers: the face fails. A BaseException, so that
    the decorator neither retries it nor counts it (it hands the breaker permit back)."""


class HTTPError(Exception):
    """A scripted non-2xx answer, shaped like an httpx/requests error (``.response``)."""

    def __init__(self, status: int, headers: dict[str, str]) -> None:
        super().__init__(f"HTTP {status}")
        self.response = _Response(status, headers)


class _Response:
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status_code = status
        self.headers = {k.lower(): v for k, v in headers.items()}


# The policy fields this runner reads; any other field that is set (a later optional field of
# format 1: hedging, the ledger, limits) is not expressible in the seed's API, so the sequence is
# listed as skipped, never run half-way.
KNOWN_FIELDS = {
    "max_attempts", "attempt_timeout_ms", "deadline_ms", "backoff", "throttled_backoff",
    "max_server_delay_ms", "retry_timeouts", "wait_on_refusal", "breaker", "budget",
}


def check_expressible(policy: dict[str, Any]) -> None:
    for field in sorted(set(policy) - KNOWN_FIELDS):
        if policy[field] is not None and policy[field] is not False:
            raise Unsupported(f"{field}: not in the seed's API")
    for field, why in [
        ("deadline_ms", "no overall deadline in the seed's API"),
        ("throttled_backoff", "one backoff for every class"),
        ("throttle", "no adaptive throttle with scripted draws in the seed's API"),
    ]:
        if policy.get(field) is not None:
            raise Unsupported(f"{field}: {why}")
    if policy.get("retry_timeouts") is False:
        raise Unsupported("retry_timeouts: false: timeouts are always retried")
    if policy.get("wait_on_refusal") is True:
        raise Unsupported("wait_on_refusal: true: an open breaker answers at once")
    budget = policy.get("budget")
    if budget is not None and set(budget) != {"token_bucket"}:
        raise Unsupported(f"budget {sorted(budget)}: format 1 knows only token_bucket")


class Face:
    """One sequence run through the public API in virtual time."""

    def __init__(self, sequence: dict[str, Any]) -> None:
        if sequence.get("format") != 1:
            raise RunnerError(f"format {sequence.get('format')!r}: this runner reads format 1")
        self.policy = sequence["policy"]
        check_expressible(self.policy)
        self.calls = sequence["calls"]
        self.now_ms = 0
        self.call = 0
        self.lines: list[str] = []
        self.answers: list[dict[str, Any]] = []
        self.sent = 0
        self.breaker = self._breaker(self.policy.get("breaker"))
        backoff = self.policy["backoff"]
        cap = backoff.get("cap_ms")
        self.timer_ms = self.policy.get("attempt_timeout_ms")
        self.function = reliable.reliable(
            self._downstream,
            breaker=self.breaker,
            budget=self._budget(self.policy.get("budget")),
            max_attempts=self.policy["max_attempts"],
            base_delay=backoff["base_ms"] / 1000,
            factor=backoff["factor"],
            jitter=0.0,
            max_delay=None if cap is None else cap / 1000,
            retry_after_cap=self.policy["max_server_delay_ms"] / 1000,
            sleep=self._sleep,
            classify=self._classify,
            on_call=self._end,
        )

    # --- the trace -----------------------------------------------------------------------

    def emit(self, ev: str, **fields: Any) -> None:
        record = {"t": self.now_ms, "call": self.call, "ev": ev, **fields}
        self.lines.append(json.dumps(record, separators=(",", ":")))

    def _budget(self, spec: dict[str, Any] | None) -> RetryBudget | None:
        if spec is None:
            return None
        bucket = spec["token_bucket"]
        return RetryBudget.token_bucket(
            bucket["max_tokens"],
            retry_cost=bucket["retry_cost"],
            failure_cost=bucket["failure_cost"],
            success_credit=bucket["success_credit"],
        )

    def _breaker(self, spec: dict[str, Any] | None) -> CircuitBreaker | None:
        if spec is None:
            return None
        n = spec["consecutive_failures"]
        return CircuitBreaker(
            failure_rate=1.0,
            window=n,
            cooldown=spec["open_ms"] / 1000,
            probe=spec["half_open_successes"],
            clock=lambda: self.now_ms / 1000,
            probe_limit=1,
            probe_timeout=1e9,
            on_transition=lambda a, b, at: self.emit(
                "breaker", **{"from": a.replace("_", "-"), "to": b.replace("_", "-")}
            ),
        )

    # --- the scripted downstream and the hooks ---------------------------------------------

    def _downstream(self) -> str:
        if not self.answers:
            raise RunnerError(f"call {self.call}: script exhausted")
        answer = self.answers.pop(0)
        self.sent += 1
        self.emit("attempt", n=self.sent)
        latency = int(answer.get("latency_ms", 0))
        transport = answer.get("transport")
        if transport == "timeout" and self.timer_ms is None:
            raise RunnerError(f"call {self.call}: a timeout answer with no timer")
        if self.timer_ms is not None and (transport == "timeout" or self.timer_ms < latency):
            self.now_ms += self.timer_ms
            raise TimeoutError("attempt timed out")
        self.now_ms += latency
        if transport == "reset":
            raise ConnectionResetError("reset")
        if transport is not None:
            raise RunnerError(f"call {self.call}: unknown transport {transport!r}")
        status = int(answer["status"])
        if status < 400:
            self.emit("answer", n=self.sent, **{"class": "ok", "accepted": True})
            return "ok"
        raise HTTPError(status, answer.get("headers") or {})

    def _classify(self, exc: BaseException) -> tuple[str, float | None]:
        kind, hint = reliable.classify(exc)
        if not isinstance(exc, CircuitOpenError):
            name = kind.replace("_", "-")
            accepted = name in ACCEPTED
            self.emit("answer", n=self.sent, **{"class": name, "accepted": accepted})
        return kind, hint

    def _sleep(self, seconds: float) -> None:
        delay_ms = round(seconds * 1000)
        self.emit("retry", delay_ms=delay_ms)
        self.now_ms += delay_ms

    def _end(self, record: CallRecord) -> None:
        if record.outcome == "success":
            self.emit("end", result="ok", attempts=self.sent)
        elif record.outcome in ("rejected", "fallback"):
            self.emit("refused", by="breaker")
            self.emit("end", result="refused", attempts=self.sent)
        else:
            self.emit("end", result="gave-up", reason=record.reason, attempts=self.sent)

    # --- the run ---------------------------------------------------------------------------

    def run(self) -> list[str]:
        for i, call in enumerate(self.calls):
            self.call = i
            self.now_ms = max(self.now_ms, int(call["start_ms"]))
            self.answers = list(call["answers"])
            self.sent = 0
            try:
                self.function()
            except RunnerError:
                raise
            except Exception:
                pass  # the call gave up or was refused; its end is in the trace
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
    # Sequences this face still decides with its own loop, not the core's engine: each must differ.
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
        except RunnerError as err:
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
        print(f"  not expressible in the seed's API: {s}")
    if missing:
        print(f"  no expected trace for: {', '.join(missing)}")
    if waiting:
        print(f"  decided by the face's own loop, not yet the engine's: {', '.join(waiting)}")
    if args.traces is not None:
        same = len(ran) - len(differ) - len(missing) - len(waiting)
        print(f"{same} passed, {len(differ)} failed")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
