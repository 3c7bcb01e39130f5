from reliable import CircuitBreaker, reliable

breaker = CircuitBreaker(
    failure_rate=0.5,  # >= 50% failures over the window opens it
    window=20,         # the last 20 calls
    cooldown=30.0,     # seconds open before a probe
    probe=3,           # 3 successful probes in a row close it
)


def cache_fallback() -> str:
    return "cached answer"


@reliable(
    breaker=breaker,
    timeout=8.0,       # per attempt, seconds
    max_attempts=5,    # the first try included
    base_delay=0.2,    # then 0.4 s, 0.8 s, ... (factor 2)
    jitter=0.1,        # ±10%, so clients that failed together do not retry together
    on_open=lambda *a, **k: cache_fallback(),  # while the breaker is open
)
def call_llm(prompt: str) -> str:
    return f"model answer to {prompt}"  # your model or HTTP call


print(call_llm("hello"), breaker.state)
