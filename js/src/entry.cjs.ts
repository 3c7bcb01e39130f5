// The CommonJS entry: `require` cannot wait, and Node compiles the small module synchronously.
import { decodeBase64 } from "./abi.js";
import { bind } from "./lib.js";
import { wasmBase64 } from "./wasm-bytes.js";

bind(new WebAssembly.Instance(new WebAssembly.Module(decodeBase64(wasmBase64))));

export { Chaos, ChaosResponse, ChaosTimeline, CircuitBreaker, CircuitOpenError, expBackoff, Policy, RefusedError, reliable, retryAfterMs } from "./lib.js";
export type {
  AnswerClass,
  AttemptContext,
  BackoffOptions,
  BreakerState,
  ChaosAnswer,
  ChaosBehavior,
  ChaosEvent,
  ChaosFault,
  ChaosLatency,
  ChaosOptions,
  ChaosOutcome,
  ChaosRate,
  ChaosStrategy,
  CircuitBreakerOptions,
  Clock,
  GiveUpReason,
  PolicyFile,
  PolicyStack,
  Refuser,
  Reliable,
  ReliableEvent,
  ReliableOptions,
  Rng,
  Sleep,
  TimelineFault,
} from "./lib.js";
