"""Policy files through the package: loading (bounded, validated, errors naming where), the
calls they decide (hedging with asyncio tasks and with threads, limits shared across threads),
and ``rng`` as a ``random.Random``."""

from __future__ import annotations

import asyncio
import json
import random
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from reliable import CircuitOpenError, Policy, RefusedError, exp_backoff, reliable

ROOT = Path(__file__).resolve().parents[2]


def stack(inner: dict[str, Any], **retry: Any) -> str:
    policy = {"max_attempts": 2, "backoff": {"shape": {"Constant": {"delay": "10ms"}}}, **retry}
    return json.dumps({"name": "t", "stack": {"Retry": {"policy": policy, "inner": inner}}})


def call(timeout: str | None = None) -> dict[str, Any]:
    return {"Call": {"downstream": "api", "timeout": timeout}}


def hedged(delay: str = "20ms") -> str:
    inner = {"Hedge": {"config": {"delay": {"Fixed": delay}, "max_hedges": 1}, "idempotent": True,
                       "inner": call()}}
    return stack(inner)


# --- loading ---------------------------------------------------------------------------------


def test_a_scenario_file_policy_loads_by_name() -> None:
    p = Policy.from_file(ROOT / "scenarios" / "hedging-storm.ron", "hedge at p95, ledger")
    assert p.hedges and p.name == "api"


def test_a_breaker_with_a_time_window_opens_on_the_failures_of_its_span(clock: Any) -> None:
    """A policy file's breaker may count by time (``window: Time``), as the simulator's do: the
    failures of the last span open it; failures older than the span no longer count."""
    config = {"failure_rate": 0.5, "minimum_calls": 3,
              "window": {"Time": {"span": "10s", "buckets": 10}}}
    text = json.dumps({"name": "t", "stack": {"Breaker": {"config": config, "inner": call()}}})
    policy = Policy.from_json(text, clock=clock)

    def fail() -> str:
        raise ConnectionError("down")

    f = reliable(fail, policy=policy)
    for _ in range(2):
        with pytest.raises(ConnectionError):
            f()
    clock.now = 11.0  # both failures leave the span: the third is alone, the breaker stays closed
    with pytest.raises(ConnectionError):
        f()
    for _ in range(2):
        with pytest.raises(ConnectionError):
            f()
    with pytest.raises(CircuitOpenError):
        f()
    Policy.from_file(ROOT / "scenarios" / "fleet-breaker.ron", "per-instance breaker")


def test_every_scenario_policy_loads_or_is_refused_for_what_this_face_lacks() -> None:
    """Every client policy of every scenario file loads, except what the engine does not run
    here (a Fallback, an Llm, a breaker per host, a fleet's store) or what only a simulated caller
has (a drawn timeout), refused naming where."""
    lacks = ("the engine does not run a", "scope PerHost needs a balancer",
             "scope Fleet shares state through a store this face does not have",
             "a timeout_dist draws a timeout per simulated caller")
    loaded = refused = 0
    for path in sorted((ROOT / "scenarios").glob("*.ron")):
        for body in path.read_text(encoding="utf-8").split("Scenario(")[1:]:
            scenario = re.search(r'name: "([^"]+)"', body)
            assert scenario is not None, path.name
            for name in re.findall(r'\(name: "([^"]+)", stack:', body):
                try:
                    Policy.from_file(path, name, scenario=scenario.group(1))
                    loaded += 1
                except ValueError as e:
                    assert any(why in str(e) for why in lacks), f"{path.name} {name}: {e}"
                    assert ": stack" in str(e), f"{path.name} {name}: {e}"
                    refused += 1
    assert loaded >= 2 * refused and loaded >= 20, (loaded, refused)


def test_a_json_policy_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text(hedged(), encoding="utf-8")
    assert Policy.from_file(path).hedges


def test_every_nesting_the_engine_runs_loads() -> None:
    # Gates outside the retry (per call) and inside it (per attempt), in any order; the ledger
    # among the gates outside.
    retry = {"policy": {"max_attempts": 2, "backoff": {"shape": {"Constant": {"delay": "1ms"}}}}}
    ledger = {"config": {"ratio": 0.1, "min_per_sec": 1, "ttl": "10s", "slots": 10}}
    breaker = {"config": {"consecutive_failures": 3}}
    limit = {"config": {"rule": "Fixed", "initial": 4, "min": 4, "max": 4}}
    rate = {"config": {"rate": 10, "period": "1s", "burst": 10}}
    chains = [
        [("Throttle", {}), ("Retry", retry)],
        [("Limit", limit), ("Retry", retry), ("Breaker", breaker)],
        [("Breaker", breaker), ("Ledger", ledger), ("Throttle", {}), ("Retry", retry),
         ("RateLimit", rate)],
        [("RateLimit", rate), ("Limit", limit), ("Breaker", breaker), ("Throttle", {})],
        [("Retry", retry), ("Breaker", breaker), ("Throttle", {})],
    ]
    for chain in chains:
        layer: dict[str, Any] = call()
        for kind, body in reversed(chain):
            layer = {kind: {**body, "inner": layer}}
        Policy.from_json(json.dumps({"name": "t", "stack": layer}))


@pytest.mark.parametrize(
    "text,says",
    [
        ('{"name": "t", "stack": {"Call": {"downstrem": "api"}}}', "<json>:1:"),
        ('{"name": "t", "stack": {"Retry": {"policy": {"max_attempts": 0, "backoff": '
         '{"shape": {"Constant": {"delay": "1ms"}}}}, "inner": {"Call": {"downstream": "a"}}}}}',
         "stack: "),
        (stack({"Retry": {"policy": {"backoff": {"shape": {"Constant": {"delay": "1ms"}}}},
                          "inner": call()}}), "stack.inner: a second Retry on the route"),
        ('{"name": "t", "stack": {"Fallback": []}}', "stack: an empty Fallback"),
        ('{"name": "t", "stack": {"Fallback": [{"Call": {"downstream": "api", "timeout": null}}]}}',
         "stack: the engine does not run a Fallback"),
        ("[" * 200 + "]" * 200, "<json>:1:"),
    ],
)
def test_a_bad_policy_is_refused_naming_where(text: str, says: str) -> None:
    with pytest.raises(ValueError) as e:
        Policy.from_json(text)
    assert says in str(e.value)


def test_a_scenario_file_with_several_policies_asks_for_a_name() -> None:
    with pytest.raises(ValueError, match="name one with name="):
        Policy.from_file(ROOT / "scenarios" / "default.ron")
    with pytest.raises(ValueError, match='no policy named "nope"'):
        Policy.from_file(ROOT / "scenarios" / "default.ron", "nope")


def test_a_huge_policy_text_is_refused() -> None:
    with pytest.raises(ValueError, match="at most"):
        Policy.from_json(" " * (1 << 21))


def test_the_policy_decides_so_the_retry_arguments_are_refused_beside_it() -> None:
    p = Policy.from_json(hedged())
    with pytest.raises(TypeError, match="max_attempts: the policy decides it"):
        reliable(policy=p, max_attempts=3)
    with pytest.raises(TypeError, match="policy: must be a Policy"):
        reliable(policy="p.json")  # type: ignore[arg-type]


# --- hedging ---------------------------------------------------------------------------------


def test_async_hedge_wins_and_the_slow_copy_is_cancelled() -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    cancelled = []
    sent = 0

    async def fetch() -> str:
        nonlocal sent
        sent += 1
        me = sent
        try:
            await asyncio.sleep(5 if me == 1 else 0)
        except asyncio.CancelledError:
            cancelled.append(me)
            raise
        return f"copy {me}"

    f = reliable(fetch, policy=Policy.from_json(hedged()), on_event=lambda n, d: events.append((n, d)))
    assert asyncio.run(f()) == "copy 2"
    assert cancelled == [1]
    assert ("hedge", {"n": 2}) in events and ("cancelled", {"n": 1}) in events


def test_sync_hedge_runs_copies_in_threads() -> None:
    release = threading.Event()
    sent = 0
    lock = threading.Lock()

    def fetch() -> str:
        nonlocal sent
        with lock:
            sent += 1
            me = sent
        if me == 1:
            release.wait(5)  # the first copy hangs until the test ends
        return f"copy {me}"

    f = reliable(fetch, policy=Policy.from_json(hedged()))
    try:
        assert f() == "copy 2"
    finally:
        release.set()


# --- shared state ----------------------------------------------------------------------------


def test_a_shared_limit_is_shared_by_every_call_through_the_policy_across_threads() -> None:
    inner = {"Limit": {"config": {"rule": "Fixed", "initial": 1, "min": 1, "max": 1},
                       "scope": "Shared", "inner": call()}}
    policy = Policy.from_json(stack(inner))
    inside = threading.Event()
    leave = threading.Event()

    def work() -> str:
        inside.set()
        leave.wait(5)
        return "done"

    f = reliable(work, policy=policy)
    results: list[Any] = []
    t = threading.Thread(target=lambda: results.append(f()))
    t.start()
    try:
        assert inside.wait(5)
        with pytest.raises(RefusedError) as e:
            reliable(lambda: "x", policy=policy)()
        assert e.value.by == "limiter" and isinstance(e.value, CircuitOpenError)
    finally:
        leave.set()
        t.join(5)
    assert results == ["done"]


# --- rng -------------------------------------------------------------------------------------


def test_rng_may_be_a_random_random() -> None:
    a = exp_backoff(3, base=1.0, factor=2.0, jitter=0.5, rng=random.Random(7))
    b = exp_backoff(3, base=1.0, factor=2.0, jitter=0.5, rng=random.Random(7).random)
    assert a == b and a != 4.0
    waits: list[float] = []
    f = reliable(lambda: 1 / 0, max_attempts=3, rng=random.Random(7), sleep=waits.append)
    with pytest.raises(ZeroDivisionError):
        f()
    assert len(waits) == 2


def test_rng_of_another_kind_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="rng: must be a callable returning a float"):
        reliable(rng=42)(lambda: None)


def test_threads_sharing_a_throttle_whose_rng_lets_others_run_do_not_deadlock() -> None:
    # The throttle asks `rng` while it holds its state; `rng` sleeping lets the interpreter
    # switch threads, and another thread then waits for that state.
    throttle = {"Throttle": {"config": {"k": 2.0, "window": "10s", "buckets": 10, "max_rejection": 0.5},
                             "inner": call()}}

    def rng() -> float:
        time.sleep(0.001)
        return 0.99

    policy = Policy.from_json(stack(throttle), rng=rng)
    f = reliable(lambda: "ok", policy=policy)
    done: list[str] = []
    threads = [threading.Thread(target=lambda: done.extend(f() for _ in range(20)), daemon=True)
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(done) == 160
