import json

from reliable import CircuitOpenError, Policy, reliable

# One policy for two functions: a Retry whose budget each function keeps (budget_scope PerClient,
# the default), around one limit of 8 calls in flight and one breaker for both (scope Shared).
policy = Policy.from_json(json.dumps({
    "name": "api",
    "stack": {"Retry": {
        "policy": {"max_attempts": 2, "backoff": {"shape": {"Constant": {"delay": "10ms"}}}},
        "budget": {"Ratio": {"ratio": 0.2, "min_per_sec": 10, "ttl": "10s"}},
        "budget_scope": "PerClient",
        "inner": {"Limit": {
            "config": {"rule": "Fixed", "initial": 8, "min": 8, "max": 8}, "scope": "Shared",
            "inner": {"Breaker": {
                "config": {"consecutive_failures": 5}, "scope": "Shared",
                "inner": {"Call": {"downstream": "api"}},
            }},
        }},
    }},
}))


@reliable(policy=policy)
def list_users() -> list[str]:
    raise ConnectionError("api down")  # your call to https://api.example/users


@reliable(policy=policy)
def list_orders() -> list[str]:
    return ["order 1"]  # your call to https://api.example/orders


for _ in range(3):  # 5 failed attempts in a row through list_users ...
    try:
        list_users()
    except (ConnectionError, CircuitOpenError) as e:
        print("list_users:", type(e).__name__)
try:
    list_orders()  # ... open the breaker list_orders passes too
except CircuitOpenError:
    print("list_orders: refused by the shared breaker")
breaker = policy.breaker  # the Shared breaker (None if it were PerClient: each function's own)
print("breaker:", breaker.state if breaker is not None else None)
