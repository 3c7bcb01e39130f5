import { CircuitBreaker, CircuitOpenError, reliable } from "reliablekit";

const cachedAnswer = (prompt: string) => new Response(`cached answer to ${prompt}`);

const breaker = new CircuitBreaker({
  failureRate: 0.5, // trip when >= 50% of the window failed
  window: 20,       // the last 20 calls (decides once the window is full)
  cooldown: 30_000, // ms open before probing
  probe: 3,         // 3 successes in a row close it; any failure re-opens it
});

// reliable(fn) gives fn exactly the caller's arguments; reliable.withContext(fn) gives it the
// attempt's context first. Pass its signal on: a timed-out attempt is aborted.
const callLlm = reliable.withContext(
  async ({ signal }, prompt: string) => {
    const res = await fetch("https://api.example.com/v1/complete", { method: "POST", body: prompt, signal });
    return res; // a 429/503/529 waits its Retry-After, a 408 or another 5xx backs off
  },
  {
    breaker,
    timeout: 8000,   // per attempt, ms (Infinity: none)
    maxAttempts: 5,  // the first try included
    baseDelay: 200,  // ms; factor 2 by default
    jitter: 0.1,     // ±10%
    onOpen: (err: CircuitOpenError, prompt) => cachedAnswer(prompt), // while open: fallback
  },
);

const res = await callLlm("hi");
const ac = new AbortController();
await callLlm.withSignal(ac.signal, "hi"); // ac.abort() cancels the whole call
