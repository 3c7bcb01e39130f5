"""Policies of the scenario files, loaded with ``Policy.from_file`` as the simulator's files are
written, decide exactly as the core's call engine in Rust: each case of
``conformance/policy-files/cases.json`` runs the same scripted calls through the package (on a
virtual-time event loop, as the conformance runner does) and must write the trace the Rust
reference wrote (``conformance/tests/policy_file_traces.rs``), byte for byte."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from reliable import Policy

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "conformance" / "policy-files"
sys.path.insert(0, str(ROOT / "python" / "conformance"))

import run  # noqa: E402  (the conformance runner: its virtual-time face)

SPEC = json.loads((CASES / "cases.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", SPEC["cases"], ids=lambda c: c["trace"][:-6])
def test_a_scenario_policy_decides_as_the_engine(case: dict[str, Any]) -> None:
    def load(clock: Any, rng: Any) -> Policy:
        return Policy.from_file(
            ROOT / case["file"], case["policy"], scenario=case.get("scenario"), clock=clock, rng=rng
        )

    sequence = {"format": 1, "name": case["trace"], "policy": {}, "calls": SPEC["calls"],
                "draws": SPEC["draws"]}
    lines = run.Face(sequence, load=load, cyclic=True).run()
    want = (CASES / "traces" / case["trace"]).read_text(encoding="utf-8").splitlines()
    for k, (w, g) in enumerate(zip(want, lines)):
        assert g == w, f"line {k + 1} differs"
    assert len(lines) == len(want)
