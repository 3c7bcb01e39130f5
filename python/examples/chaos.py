"""Chaos: a 503 with Retry-After injected into one attempt in four, read by the retry as a real
one; switched off at run time; every injection told to on_event as Polly names it."""

import reliable
from reliable import Chaos

chaos = Chaos(fault={"rate": 0.25, "seed": 7, "status": 503, "retry_after": 0.05})
seen = []


@reliable.reliable(max_attempts=4, base_delay=0.01, chaos=chaos,
                   on_event=lambda name, fields: seen.append(fields["event"]) if name == "chaos" else None)
def call_llm(prompt: str) -> str:
    return f"answer to {prompt}"


for i in range(8):
    assert call_llm(f"q{i}") == f"answer to q{i}"
print(f"{seen.count('Chaos.OnFault')} faults injected in {chaos.attempts} attempts")
before = chaos.attempts
chaos.set_enabled("fault", False)  # off: nothing injected, nothing drawn
call_llm("q8")
assert chaos.attempts == before
