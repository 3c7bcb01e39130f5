import asyncio

from reliable import CircuitBreaker, RetryBudget, reliable

breaker = CircuitBreaker(failure_rate=0.5, window=20, cooldown=30.0, probe=3)
budget = RetryBudget(0.1)  # retries <= 10% of calls, shared by every function given it


@reliable(
    breaker=breaker,
    timeout=8.0,  # async: a timed-out attempt's task is cancelled
    max_attempts=5,
    base_delay=0.2,
    jitter=0.1,
    on_open=lambda *a, **k: "cached answer",
    budget=budget,
)
async def call_llm(prompt: str) -> str:
    await asyncio.sleep(0)  # your model or HTTP call
    return f"model answer to {prompt}"


print(asyncio.run(call_llm("hello")), breaker.state)
