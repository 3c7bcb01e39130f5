// Type-checked against the package's .d.ts in the empty project (tsc --noEmit).
import { CircuitBreaker, CircuitOpenError, reliable, type BreakerState } from "reliablekit";

const breaker = new CircuitBreaker({ failureRate: 0.5, window: 20, cooldown: 30_000, probe: 3 });
const getUser = reliable.withContext(
  async ({ signal }, id: number): Promise<string> => {
    const res = await fetch(`http://127.0.0.1:9/users/${id}`, { signal });
    return res.text();
  },
  { breaker, timeout: 8000, onOpen: (err: CircuitOpenError, id: number) => `cached user ${id} (${err.retryAfter} ms)` },
);
const state: BreakerState = breaker.state;
const pending: Promise<string> = getUser(42);
void pending.catch(() => {});
// @ts-expect-error: the wrapped function takes the original's arguments
void getUser("not a number").catch(() => {});
console.log(state);
