"""Chaos: the four strategies through the decorator, their switches and events, the kill switch,
a scenario's fault timeline, the arguments refused by name, and the same decisions as the Rust
layers for the same seed (the fixture the Rust switch writes, ``conformance/chaos-decisions.json``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import reliable
from reliable import Chaos, ChaosError, ChaosResponse, ChaosTimeline, CircuitBreaker, CircuitOpenError

from conftest import Clock, Sleeps

FIXTURE = Path(__file__).resolve().parents[2] / "conformance" / "chaos-decisions.json"


class Calls:
    """The downstream: counts its calls and answers ``value``."""

    def __init__(self, value: Any = "real") -> None:
        self.n = 0
        self.value = value

    def __call__(self) -> Any:
        self.n += 1
        return self.value


def events_of(log: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [fields["event"] for name, fields in log if name == "chaos"]


def test_an_injected_503_is_read_by_the_retry_like_a_real_one(sleeps: Sleeps) -> None:
    log: list[tuple[str, dict[str, Any]]] = []
    chaos = Chaos(fault={"rate": 1.0, "seed": 3, "status": 503, "retry_after": 1.5})
    calls = Calls()
    f = reliable.reliable(calls, max_attempts=3, base_delay=0.1, jitter=0.0, sleep=sleeps,
                          chaos=chaos, on_event=lambda n, e: log.append((n, e)))
    with pytest.raises(ChaosError) as info:
        f()
    assert info.value.response.status_code == 503
    # Retry-After 2 (whole seconds, rounded up) and retry-after-ms 1500: the retry waits 1.5 s.
    assert info.value.response.headers == {"retry-after": "2", "retry-after-ms": "1500"}
    assert sleeps.waits == [1.5, 1.5]
    assert calls.n == 0, "a fault answers without calling"
    assert events_of(log) == ["Chaos.OnFault"] * 3
    answers = [e for n, e in log if n == "answer"]
    assert [a["class"] for a in answers] == ["throttled"] * 3
    assert chaos.attempts == 3


def test_an_injected_fault_opens_the_breaker(clock: Clock) -> None:
    breaker = CircuitBreaker(failure_rate=1.0, window=2, cooldown=10.0, clock=clock)
    chaos = Chaos(fault={"rate": 1.0, "reset": True})
    calls = Calls()
    f = reliable.reliable(calls, breaker=breaker, max_attempts=1, chaos=chaos)
    for _ in range(2):
        with pytest.raises(ConnectionResetError):
            f()
    with pytest.raises(CircuitOpenError):
        f()
    assert breaker.state == "open"
    # Refused before the chaos layer: no attempt counted.
    assert chaos.attempts == 2
    assert calls.n == 0


def test_switched_off_it_injects_and_counts_nothing_and_kill_all_stops_it(sleeps: Sleeps) -> None:
    chaos = Chaos(fault={"rate": 1.0, "status": 500, "enabled": False})
    calls = Calls()
    f = reliable.reliable(calls, max_attempts=1, sleep=sleeps, chaos=chaos)
    assert f() == "real"
    assert chaos.enabled == [] and chaos.attempts == 0
    chaos.set_enabled("fault", True)
    assert chaos.enabled == ["fault"]
    with pytest.raises(ChaosError):
        f()
    assert chaos.attempts == 1
    Chaos.kill_all(True)
    try:
        assert Chaos.killed()
        assert f() == "real"
        assert chaos.attempts == 1, "killed: nothing drawn"
    finally:
        Chaos.kill_all(False)
    with pytest.raises(ChaosError):
        f()
    # A strategy not configured stays off.
    chaos.set_enabled("latency", True)
    assert chaos.enabled == ["fault"]


def test_outcome_latency_and_behaviour(sleeps: Sleeps) -> None:
    seen: list[int] = []
    log: list[tuple[str, dict[str, Any]]] = []
    chaos = Chaos(
        outcome={"rate": 1.0, "value": "chosen"},
        latency={"rate": 1.0, "seed": 9, "min": 0.01, "max": 0.02},
        behavior={"rate": 1.0, "callback": lambda: seen.append(1)},
    )
    calls = Calls()
    f = reliable.reliable(calls, max_attempts=1, sleep=sleeps, chaos=chaos,
                          on_event=lambda n, e: log.append((n, e)))
    assert f() == "chosen"
    assert calls.n == 0 and seen == [1]
    assert len(sleeps.waits) == 1 and 0.01 <= sleeps.waits[0] <= 0.02
    # Reported in the order of the Rust layers: behaviour, latency, the answer.
    assert events_of(log) == ["Chaos.OnBehavior", "Chaos.OnLatency", "Chaos.OnOutcome"]
    delays = [e["delay"] for n, e in log if n == "chaos" and e["event"] == "Chaos.OnLatency"]
    assert delays == sleeps.waits
    # An outcome's status: a success is returned as a response.
    ok = reliable.reliable(calls, max_attempts=1, chaos=Chaos(outcome={"rate": 1.0, "status": 204}))
    res = ok()
    assert isinstance(res, ChaosResponse) and res.status_code == 204


def test_a_fault_may_raise_the_users_exception_and_a_hang_ends_at_the_timeout() -> None:
    class Boom(Exception):
        pass

    f = reliable.reliable(Calls(), max_attempts=1, chaos=Chaos(fault={"rate": 1.0, "error": Boom("x")}))
    with pytest.raises(Boom):
        f()

    async def real() -> str:
        return "real"

    g = reliable.reliable(real, max_attempts=1, timeout=0.05, chaos=Chaos(fault={"rate": 1.0, "hang": True}))
    with pytest.raises(TimeoutError):
        asyncio.run(g())


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"fault": {"rate": 1.5, "status": 503}}, ValueError, "fault.rate"),
        ({"fault": {"rate": float("nan"), "status": 503}}, ValueError, "fault.rate"),
        ({"fault": {"rate": "x", "status": 503}}, TypeError, "fault.rate"),
        ({"fault": {"status": 503}}, TypeError, "fault.rate"),
        ({"fault": {"rate": 0.1, "status": 200}}, ValueError, "fault.status"),
        ({"fault": {"rate": 0.1, "status": 42}}, ValueError, "fault.status"),
        ({"fault": {"rate": 0.1, "status": 503, "retry_after": -1}}, ValueError, "fault.retry_after"),
        ({"fault": {"rate": 0.1, "status": 503, "colour": 1}}, TypeError, "fault.colour"),
        ({"fault": {"rate": 0.1}}, TypeError, "fault"),
        ({"fault": {"rate": 0.1, "status": 503, "seed": -1}}, ValueError, "fault.seed"),
        ({"fault": {"rate": 0.1, "status": 503, "seed": 2**64}}, ValueError, "fault.seed"),
        ({"fault": {"rate": 0.1, "error": 3}}, TypeError, "fault.error"),
        ({"fault": [1]}, TypeError, "fault"),
        ({"latency": {"rate": 0.5, "min": 0.5, "max": 0.1}}, ValueError, "latency.max"),
        ({"latency": {"rate": 0.5}}, TypeError, "latency"),
        ({"outcome": {"rate": 0.5, "enabled": 1, "status": 200}}, TypeError, "outcome.enabled"),
        ({"behavior": {"rate": 0.5}}, TypeError, "behavior.callback"),
        ({"behavior": {"rate": 0.5, "callback": 3}}, TypeError, "behavior.callback"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs: dict[str, Any], error: type, text: str) -> None:
    with pytest.raises(error) as info:
        Chaos(**kwargs)
    assert str(info.value).startswith(text), str(info.value)


def test_the_decorator_refuses_what_is_not_chaos() -> None:
    with pytest.raises(TypeError, match="^chaos: "):
        reliable.reliable(Calls(), chaos="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^strategy: "):
        Chaos(fault={"rate": 0.1, "reset": True}).set_enabled("lag", True)


# --- the same decisions as the Rust layers ---------------------------------------------------


def chaos_of(config: dict[str, Any], bump: int = 0) -> Chaos:
    """The fixture's neutral config as this package's ``Chaos`` (seeds moved by ``bump``)."""
    f, lat, o, b = config["fault"], config["latency"], config["outcome"], config["behavior"]
    return Chaos(
        fault={"rate": f["rate"], "seed": f["seed"] + bump, "status": f["status"],
               "retry_after": f["retry_after_ms"] / 1000},
        latency={"rate": lat["rate"], "seed": lat["seed"] + bump, "min": lat["min_ms"] / 1000,
                 "max": lat["max_ms"] / 1000},
        outcome={"rate": o["rate"], "seed": o["seed"] + bump, "status": o["status"]},
        behavior={"rate": b["rate"], "seed": b["seed"] + bump, "callback": lambda: None},
    )


def decisions(chaos: Chaos, n: int) -> list[list[Any]]:
    out = []
    for _ in range(n):
        d = chaos._decide()
        if d is None:
            out.append([False, None, None])
            continue
        events, behavior, delay, answer = d
        names = [e[0] for e in events]
        which = "fault" if "Chaos.OnFault" in names else "outcome" if "Chaos.OnOutcome" in names else None
        out.append([behavior is not None, None if delay is None else round(delay * 1e9), which])
    return out


def test_the_same_seed_decides_as_the_rust_switch_and_another_seed_does_not() -> None:
    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert len(fixture["cases"]) >= 3
    for case in fixture["cases"]:
        want = case["decisions"]
        assert decisions(chaos_of(case["config"]), len(want)) == want, case["seed"]
        # Negative control: the same config with other seeds decides otherwise.
        assert decisions(chaos_of(case["config"], bump=1), len(want)) != want, case["seed"]


def test_the_draw_is_the_cores() -> None:
    # Pinned in core/src/chaos.rs for every port.
    assert reliable._core.chaos_draw(0, 0, 0) == 0xA706DD2F4D197E6F


# --- a scenario's fault timeline -------------------------------------------------------------

SCENARIO = """Scenario(name: "x", horizon: "10s", faults: [
    Outage(downstream: "api", from: "1s", until: "2s", mode: FailFast),
    Throttle(downstream: "api", from: "3s", until: "4s", retry_after: "3s"),
    Partition(downstream: "api", from: "5s", until: "6s"),
    ErrorRate(downstream: "other", from: "0s", until: "9s", rate: 1.0),
])"""


def test_a_timeline_plays_the_scenarios_faults_by_the_clock(clock: Clock) -> None:
    tl = ChaosTimeline.from_scenario(SCENARIO, "api", seed=1, clock=clock)
    assert [f[0] for f in tl.faults] == ["outage", "throttle", "partition"]
    log: list[tuple[str, dict[str, Any]]] = []
    sleeps = Sleeps(clock)
    calls = Calls()
    f = reliable.reliable(calls, max_attempts=1, sleep=sleeps, chaos=tl, clock=clock,
                          on_event=lambda n, e: log.append((n, e)))
    assert f() == "real"  # before any fault
    clock.now = 1.5
    with pytest.raises(ChaosError) as outage:
        f()
    assert outage.value.response.status_code == 503
    clock.now = 3.5
    with pytest.raises(ChaosError) as throttle:
        f()
    assert throttle.value.response.status_code == 429
    assert throttle.value.response.headers["retry-after"] == "3"
    clock.now = 5.25
    assert f() == "real"  # held until the partition heals, then sent
    assert sleeps.waits == [0.75]
    assert calls.n == 2
    assert events_of(log) == ["Chaos.OnFault", "Chaos.OnFault", "Chaos.OnLatency"]


def test_a_timeline_refuses_server_side_faults_with_the_reason() -> None:
    text = (Path(__file__).resolve().parents[2] / "scenarios" / "default.ron").read_text(encoding="utf-8")
    with pytest.raises(ValueError, match=r"^faults\[0\]: CapacityLoss refused: a capacity loss removes the server's workers"):
        ChaosTimeline.from_scenario(text, "api")
    with pytest.raises(ValueError, match="factor"):
        ChaosTimeline.from_scenario(
            'Scenario(faults: [LatencyInflation(downstream: "api", from: "1s", until: "2s", factor: 0.5)])', "api")
    with pytest.raises(TypeError, match="^seed: "):
        ChaosTimeline.from_scenario(SCENARIO, "api", seed="1")  # type: ignore[arg-type]


# --- the chaos sequences of the conformance suite, and their negative control ------------------


def test_the_chaos_sequences_pass_and_fail_with_another_seed() -> None:
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("chaos_runner", root / "python" / "conformance" / "run.py")
    assert spec is not None and spec.loader is not None
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    files = sorted((root / "conformance" / "chaos").glob("*.json"))
    assert len(files) >= 4
    seeded = 0
    for path in files:
        sequence = json.loads(path.read_text(encoding="utf-8"))
        want = path.with_suffix(".jsonl").read_text(encoding="utf-8").splitlines()
        assert runner.Face(sequence).run() == want, path.stem
        blocks = list(sequence["policy"]["chaos"].values())
        if not any(0 < b["rate"] < 1 for b in blocks):
            continue
        seeded += 1
        for b in blocks:
            b["seed"] += 1
        try:
            got = runner.Face(sequence).run()
        except runner.RunnerError:
            got = None  # ran out of script: a difference too
        assert got != want, f"{path.stem} passes with another seed"
    assert seeded >= 1


def test_a_timeline_stretches_latency_and_fails_successes_by_its_error_rate(clock: Clock) -> None:
    text = """Scenario(faults: [
        LatencyInflation(downstream: "api", from: "0s", until: "10s", factor: 3.0),
        ErrorRate(downstream: "api", from: "20s", until: "30s", rate: 1.0),
    ])"""
    tl = ChaosTimeline.from_scenario(text, "api", clock=clock)
    sleeps = Sleeps(clock)

    def slow() -> str:
        clock.now += 0.1  # the real call takes 100 ms
        return "real"

    f = reliable.reliable(slow, max_attempts=1, sleep=sleeps, chaos=tl, clock=clock)
    assert f() == "real"
    assert sleeps.waits == [pytest.approx(0.2)]  # stretched to 3 x 100 ms
    clock.now = 25.0
    with pytest.raises(ChaosError) as failed:
        f()
    assert failed.value.response.status_code == 500
    assert tl.attempts == 2


def test_killed_a_timeline_plays_nothing_and_counts_nothing(clock: Clock) -> None:
    tl = ChaosTimeline.from_scenario(SCENARIO, "api", clock=clock)
    f = reliable.reliable(Calls(), max_attempts=1, chaos=tl, clock=clock)
    clock.now = 1.5  # in the outage
    Chaos.kill_all(True)
    try:
        assert f() == "real"
        assert tl.attempts == 0
    finally:
        Chaos.kill_all(False)
    with pytest.raises(ChaosError):
        f()
    assert tl.attempts == 1
