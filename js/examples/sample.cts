// Type-checked as CommonJS against the package's CommonJS types (tsc --noEmit).
import reliablekit = require("reliablekit");

const breaker = new reliablekit.CircuitBreaker({ failureRate: 0.5, window: 20 });
const state: reliablekit.BreakerState = breaker.state;
const delay: number = reliablekit.expBackoff(2, { jitter: 0 });
console.log(state, delay);
