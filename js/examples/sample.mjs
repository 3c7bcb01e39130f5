// A sample for an empty project with reliablekit installed: a flaky downstream behind a breaker.
import { CircuitBreaker, CircuitOpenError, reliable } from "reliablekit";

const breaker = new CircuitBreaker({ failureRate: 0.5, window: 4, cooldown: 30_000, probe: 3 });
let calls = 0;
const callLlm = reliable.withContext(
  async ({ signal }, prompt) => {
    calls++;
    if (!(signal instanceof AbortSignal)) throw new Error("no signal");
    throw new Error(`provider down (${prompt})`);
  },
  { breaker, maxAttempts: 2, baseDelay: 1, timeout: 1000, onOpen: (err) => `cached answer (retry in ${Math.round(err.retryAfter / 1000)} s)` },
);
for (let i = 0; i < 3; i++) {
  try {
    console.log(await callLlm("hi"));
  } catch (e) {
    console.log(`error: ${e.message}`);
  }
}
console.log(`breaker ${breaker.state} after ${calls} calls; CircuitOpenError exported: ${typeof CircuitOpenError}`);
if (breaker.state !== "open" || calls !== 4) process.exit(1);
