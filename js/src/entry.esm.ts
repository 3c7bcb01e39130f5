// The ES module entry: compiles the embedded WebAssembly asynchronously (browsers refuse to
// compile more than 4 KiB synchronously on the main thread), then exports the API.
import { decodeBase64 } from "./abi.js";
import { bind } from "./lib.js";
import { wasmBase64 } from "./wasm-bytes.js";

bind(await WebAssembly.instantiate(await WebAssembly.compile(decodeBase64(wasmBase64))));

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
