"""Policies whose scope says ``Fleet``: the breaker (and the retry budget) kept in a store that
every policy naming it shares, in this process (``Store.memory``) or across processes
(``Store.redis``, against a real ``redis-server`` on 127.0.0.1 that these tests start and end),
as the simulator runs the same file and a Rust service serves it."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from reliable import CircuitOpenError, Policy, Store, reliable

ROOT = Path(__file__).resolve().parents[2]
CACHED = {"Cached": {"refresh": "10ms"}}


def breaker(scope: Any, failures: int = 8) -> str:
    config = {"consecutive_failures": failures,
              "half_open": {"max_in_flight": 1, "probe_timeout": "1s"}}
    return json.dumps({"name": "fleet", "stack": {"Breaker": {
        "config": config, "scope": scope, "inner": {"Call": {"downstream": "orders"}}}}})


def fail() -> str:
    raise ConnectionError("down")


INSTANCES = 4
#: Calls in turn through the instances: 7 failures each, short of the 8 one's own breaker needs.
TURNS = 28


def first_refusal(policies: list[Policy]) -> int | None:
    """Failing calls through the instances in turn, each 20 ms after the last (twice the fleet's
    refresh: a cached view older than it sends the results kept since and reads the store's state
    again, in the background): the number of the first call refused, or None."""
    calls = [reliable(fail, policy=p) for p in policies]
    for n in range(TURNS):
        try:
            calls[n % len(calls)]()
        except CircuitOpenError:
            return n
        except ConnectionError:
            pass
        time.sleep(0.02)
    return None


def instances_trip_one_breaker(store_of: Any) -> None:
    """Four instances (four policies loaded from one text, each with its own store handle) fail
    in turn: the fleet's breaker sees their failures in a row and opens for all of them, before
    any has seen the 8 failures its own breaker would need."""
    text = breaker({"Fleet": {"store": "shared", "mode": CACHED}})
    policies = [Policy.from_json(text, stores={"shared": store_of()}) for _ in range(INSTANCES)]
    assert all(p.breaker is None for p in policies), "the fleet's breaker stands in for a local one"
    refused = first_refusal(policies)
    assert refused is not None and refused >= 8, refused
    # Refused on its view of the fleet's breaker (the others' views follow within a refresh).
    assert policies[refused % INSTANCES].fleet_state == "open"


def test_instances_sharing_a_memory_store_trip_one_breaker() -> None:
    store = Store.memory("one-process")
    instances_trip_one_breaker(lambda: store)


def test_the_same_failures_per_instance_trip_nothing() -> None:
    """The negative control: the same breaker, one per instance (``Shared``: the instance's
    ``Policy`` holds it, readable as ``policy.breaker``), sees 7 failures of each."""
    policies = [Policy.from_json(breaker("Shared")) for _ in range(INSTANCES)]
    assert first_refusal(policies) is None
    for p in policies:
        assert p.fleet_state is None and p.breaker is not None and p.breaker.state == "closed"


def test_a_fleet_retry_budget_loads_beside_a_local_breaker() -> None:
    retry = {"max_attempts": 3, "backoff": {"shape": {"Constant": {"delay": "1ms"}}}}
    text = json.dumps({"name": "budgeted", "stack": {"Retry": {
        "policy": retry,
        "budget": {"Ratio": {"ratio": 0.1, "min_per_sec": 0, "ttl": "10s"}},
        "budget_scope": {"Fleet": {"store": "shared", "mode": CACHED}},
        "inner": {"Call": {"downstream": "orders"}}}}})
    p = Policy.from_json(text, stores={"shared": Store.memory("budget")})
    attempts = []

    def flaky() -> str:
        attempts.append(1)
        raise ConnectionError("down")

    # No first tries deposited yet, no reserve: the fleet's budget grants no retry.
    with pytest.raises(ConnectionError):
        reliable(flaky, policy=p)()
    assert len(attempts) == 1


def test_the_shipped_fleet_scenario_loads_with_its_store() -> None:
    """scenarios/fleet-breaker.ron, the file the simulator runs: its cached fleet breakers load
    with a store named as the file names it; its exact ones are refused at the field."""
    path = ROOT / "scenarios" / "fleet-breaker.ron"
    stores = {"redis": Store.memory("scenario")}
    p = Policy.from_file(path, "fleet, cached 1s", stores=stores)
    assert p.name == "orders" and p.breaker is None
    with pytest.raises(ValueError, match=r"stack\.scope\.mode: mode Exact"):
        Policy.from_file(path, "fleet, exact, fail open", stores=stores)
    # Without the store, refused as before: one breaker per process would be per-client.
    with pytest.raises(ValueError, match="scope Fleet shares state through a store"):
        Policy.from_file(path, "fleet, cached 1s")


def test_what_a_fleet_cannot_share_is_refused_at_its_field() -> None:
    stores = {"shared": Store.memory("refusals")}
    with pytest.raises(ValueError, match=r'stack\.scope\.store: no store named "elsewhere"'):
        Policy.from_json(breaker({"Fleet": {"store": "elsewhere", "mode": CACHED}}), stores=stores)
    jittered = json.dumps({"name": "j", "stack": {"Breaker": {
        "config": {"consecutive_failures": 4, "open": {"duration": "5s", "jitter": 0.2}},
        "scope": {"Fleet": {"store": "shared", "mode": CACHED}},
        "inner": {"Call": {"downstream": "orders"}}}}})
    with pytest.raises(ValueError, match=r"stack\.config\.open\.jitter: one breaker for the fleet"):
        Policy.from_json(jittered, stores=stores)
    limit = json.dumps({"name": "l", "stack": {"Limit": {
        "config": {"rule": "Fixed", "initial": 4, "min": 4, "max": 4},
        "scope": {"Fleet": {"store": "shared", "mode": CACHED}},
        "inner": {"Call": {"downstream": "orders"}}}}})
    with pytest.raises(ValueError, match="scope Fleet on a Limit"):
        Policy.from_json(limit, stores=stores)


def test_a_store_url_never_shows_its_credentials() -> None:
    store = Store.redis("redis://user:hunter2@127.0.0.1:1/0")
    assert "hunter2" not in repr(store) and "127.0.0.1" in repr(store)
    with pytest.raises(ValueError) as e:
        Store.redis("redis://user:hunter2@/nowhere:port")
    assert "hunter2" not in str(e.value)


# --- a real Redis ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listener_pid(port: int) -> int | None:
    """The pid of the Redis answering on the port (``INFO server``'s ``process_id``), if any."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0) as conn:
            conn.sendall(b"INFO server\r\n")
            reply = b""
            while len(reply) < 1 << 16:
                chunk = conn.recv(4096)
                if not chunk:
                    return None
                reply += chunk
                _, found, rest = reply.partition(b"process_id:")
                if found and b"\r\n" in rest:
                    return int(rest.split(b"\r\n")[0])
    except (OSError, ValueError):
        return None
    return None


def start_redis(exe: str, work: str,
                ports: Iterator[int] | None = None) -> tuple[int, subprocess.Popen[bytes]]:
    """A redis-server on a fresh port, and that port. Another process may take the port between
    its choosing and the server's binding: the listener must be this child (its ``INFO`` names
    its pid), never another's server taken for ours, and a taken port tries a fresh one."""
    refused = []
    for _ in range(5):
        port = next(ports) if ports is not None else free_port()
        server = subprocess.Popen(
            [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", work],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10.0
        while True:
            owner = listener_pid(port)
            if owner == server.pid:
                return port, server
            if owner is not None or server.poll() is not None or time.monotonic() > deadline:
                refused.append(f"port {port}: served by {owner}, exit {server.poll()}")
                server.kill()
                server.wait(timeout=10)
                break
            time.sleep(0.02)
    raise AssertionError(f"redis-server did not start on 5 ports: {refused}")


@pytest.fixture
def redis() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A redis-server of its own on 127.0.0.1, ended on every path (the tests need it, as the
    README says: a missing one fails here, it is not skipped)."""
    exe = shutil.which("redis-server")
    assert exe is not None, "redis-server is not installed (the README's test requirements)"
    with tempfile.TemporaryDirectory() as work:
        port, server = start_redis(exe, work)
        try:
            yield f"redis://127.0.0.1:{port}", server
        finally:
            server.send_signal(signal.SIGCONT)  # a paused server ends too
            server.kill()
            server.wait(timeout=10)


def test_a_taken_port_is_refused_not_shared(redis: tuple[str, subprocess.Popen[bytes]]) -> None:
    """The fixture's guard: a server whose port another Redis holds is not taken for a new one
    (the test would lose it when the holder ends); the next port is tried."""
    url, first = redis
    taken = int(url.rsplit(":", 1)[1])
    assert listener_pid(taken) == first.pid
    exe = shutil.which("redis-server")
    assert exe is not None
    fresh = free_port()
    with tempfile.TemporaryDirectory() as work:
        port, second = start_redis(exe, work, iter([taken, fresh]))
        try:
            assert (port, listener_pid(port)) == (fresh, second.pid) and second.pid != first.pid
        finally:
            second.kill()
            second.wait(timeout=10)


def test_instances_sharing_a_redis_trip_one_breaker(
        redis: tuple[str, subprocess.Popen[bytes]]) -> None:
    """Each instance opens its own connection, as processes would."""
    url, _ = redis
    instances_trip_one_breaker(lambda: Store.redis(url, namespace="python-test"))


@pytest.mark.parametrize("fault", ["paused", "killed"])
def test_a_redis_paused_or_killed_mid_run_never_holds_a_call(
        redis: tuple[str, subprocess.Popen[bytes]], fault: str) -> None:
    """The store stops answering (SIGSTOP) or dies (SIGKILL) while the instances call: every
    call still ends with its own answer (or the instance's own breaker's refusal, fail open), and
    none waits on the store past its bound (each decision waits at most `wait`, 5 ms, then the
    instance rests the store 250 ms: 40 calls take well under the 10 s asserted)."""
    url, server = redis
    text = breaker({"Fleet": {"store": "shared", "mode": CACHED}}, failures=1000)
    policies = [Policy.from_json(text, stores={"shared": Store.redis(url, namespace=fault)})
                for _ in range(2)]
    calls = [reliable(lambda: "ok", policy=p) for p in policies]
    for call in calls:
        assert call() == "ok"
    time.sleep(0.05)
    if fault == "paused":
        server.send_signal(signal.SIGSTOP)
    else:
        server.kill()
        server.wait(timeout=10)
    started = time.monotonic()
    for n in range(40):
        assert calls[n % 2]() == "ok"
        time.sleep(0.005)
    assert time.monotonic() - started < 10.0


def test_a_redis_that_is_gone_leaves_each_instance_its_own_breaker() -> None:
    """No server at the URL: every decision falls back to the instance's own breaker (fail
    open, the default), which trips on its own failures; no call fails because of the store."""
    text = breaker({"Fleet": {"store": "shared", "mode": CACHED}}, failures=4)
    p = Policy.from_json(text, stores={"shared": Store.redis(f"redis://127.0.0.1:{free_port()}")})
    f = reliable(fail, policy=p)
    started = time.monotonic()
    for _ in range(4):
        with pytest.raises(ConnectionError):
            f()
    with pytest.raises(CircuitOpenError):
        f()
    assert p.fleet_state is None
    # Each decision waits for the store at most its `wait` (5 ms by default), then rests.
    assert time.monotonic() - started < 5.0
