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

// Chaos: a fault injected into one copy in ten (a 503 with Retry-After), switched at run time.
import { Chaos, ChaosTimeline, type ReliableEvent } from "reliablekit";
const chaos = new Chaos({ fault: { rate: 0.1, seed: 7n, status: 503, retryAfter: 1500 }, latency: { rate: 0.2, min: 5, max: 20 } });
chaos.setEnabled("latency", false);
const timeline = new ChaosTimeline([{ kind: "Outage", from: 1000, until: 2000, hang: true }], { seed: 1 });
const chaotic = reliable(async () => "ok", { chaos, onEvent: (e: ReliableEvent) => void (e.kind === "chaos" && e.event) });
const replayed = reliable(async () => "ok", { chaos: timeline });
void chaotic().catch(() => {});
void replayed().catch(() => {});
function typo(): void {
  // @ts-expect-error: a strategy the package does not have
  chaos.setEnabled("lag", true);
}
void typo;

// One policy for several wrappers: its Shared breaker is theirs together.
import { Policy } from "reliablekit";
const shared = new Policy({ name: "api", stack: { Breaker: { config: { consecutive_failures: 5 }, scope: "Shared", inner: { Call: { downstream: "api" } } } } });
const fromText: Policy = Policy.fromJson(JSON.stringify({ stack: { Call: { downstream: "api" } } }));
const listUsers = reliable(async () => "users", { policy: shared });
const listOrders = reliable(async () => "orders", { policy: shared });
void Promise.all([listUsers(), listOrders()]).catch(() => {});
const name: string | undefined = shared.name;
console.log(name, fromText.disposed);
