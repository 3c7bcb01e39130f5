import asyncio
from pathlib import Path

from reliable import Policy, reliable

# The policy the simulator ran in scenarios/hedging-storm.ron, loaded unchanged: a hedge at the
# p95 latency, every hedge and retry drawn from one 10% ledger, a 1 s timeout per copy.
root = Path(__file__).resolve().parents[2]
policy = Policy.from_file(root / "scenarios" / "hedging-storm.ron", "hedge at p95, ledger")


@reliable(policy=policy, on_event=lambda event, fields: print(event, fields))
async def read(key: str) -> str:
    await asyncio.sleep(0.01)  # your idempotent read
    return f"value of {key}"


print(asyncio.run(read("a")))
