// The same package from CommonJS.
const { CircuitBreaker, expBackoff } = require("reliablekit");
const breaker = new CircuitBreaker();
console.log(`require: breaker ${breaker.state}, expBackoff(3) = ${expBackoff(3, { jitter: 0 })} ms`);
if (breaker.state !== "closed" || expBackoff(3, { jitter: 0 }) !== 800) process.exit(1);
