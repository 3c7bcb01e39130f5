// The WebAssembly module's exports (js/wasm/src/ffi.rs), as TypeScript sees them. Only numbers
// cross: handles are table indices, times are milliseconds. A test checks this list against the
// module's actual exports, so the two cannot drift apart.

/** The `rk_*` functions of the module, by name. */
export interface Abi {
  memory: WebAssembly.Memory;
  rk_error_kind(): number;
  rk_error_problem(): number;
  rk_error_number(i: number): number;
  rk_error_ptr(): number;
  rk_error_len(): number;
  rk_breaker_new(failureRate: number, window: number, cooldownMs: number, probe: number): number;
  rk_breaker_free(breaker: number): void;
  rk_breaker_state(breaker: number, nowMs: number): number;
  rk_policy_new(
    maxAttempts: number,
    timeoutMs: number,
    baseMs: number,
    factor: number,
    jitter: number,
    capMs: number,
    maxServerDelayMs: number,
    breaker: number,
  ): number;
  rk_policy_free(policy: number): void;
  rk_policy_share(policy: number, base: number, layers: number): number;
  rk_input_ptr(): number;
  rk_input_cap(): number;
  rk_stack_begin(): void;
  rk_stack_layer(kind: number, flag: number, len: number): number;
  rk_stack_finish(): number;
  rk_record_ptr(): number;
  rk_call_start(policy: number, nowMs: number, backoff: number, throttle: number): number;
  rk_call_answer(
    call: number,
    n: number,
    status: number,
    serverDelayMs: number,
    shouldRetry: number,
    overloaded: number,
    nowMs: number,
    backoff: number,
    throttle: number,
  ): number;
  rk_call_tick(call: number, nowMs: number, backoff: number, throttle: number): number;
  rk_call_cancel(call: number, nowMs: number): number;
  rk_call_poll(call: number): number;
  rk_call_timeout(call: number, nowMs: number): number;
  rk_call_free(call: number, nowMs: number): void;
  rk_event(): number;
  rk_event_number(i: number): number;
  rk_gave_up_ptr(): number;
  rk_gave_up_len(): number;
  rk_exp_backoff(attempt: number, baseMs: number, factor: number, jitter: number, unit: number): number;
  rk_answer(status: number, serverDelayMs: number, shouldRetry: number, overloaded: number): number;
  rk_chaos_new(): number;
  rk_chaos_free(chaos: number): void;
  rk_chaos_set(chaos: number, stream: number, on: number): number;
  rk_chaos_attempts(chaos: number): number;
  rk_chaos_decide(chaos: number): number;
  rk_chaos_out_ptr(): number;
  rk_timeline_begin(seedHi: number, seedLo: number): number;
  rk_timeline_fault(kind: number, fromMs: number, untilMs: number, a: number, b: number): number;
  rk_timeline_finish(): number;
  rk_timeline_free(timeline: number): void;
  rk_timeline_send(timeline: number, tMs: number, n: number): number;
  rk_timeline_answer(timeline: number, tMs: number, n: number, success: number): number;
  rk_timeline_out_ptr(): number;
}

/** The names above, for the drift test. */
export const ABI_FUNCTIONS: readonly (keyof Abi)[] = [
  "rk_error_kind",
  "rk_error_problem",
  "rk_error_number",
  "rk_error_ptr",
  "rk_error_len",
  "rk_breaker_new",
  "rk_breaker_free",
  "rk_breaker_state",
  "rk_policy_new",
  "rk_policy_free",
  "rk_policy_share",
  "rk_input_ptr",
  "rk_input_cap",
  "rk_stack_begin",
  "rk_stack_layer",
  "rk_stack_finish",
  "rk_record_ptr",
  "rk_call_start",
  "rk_call_answer",
  "rk_call_tick",
  "rk_call_cancel",
  "rk_call_poll",
  "rk_call_timeout",
  "rk_call_free",
  "rk_event",
  "rk_event_number",
  "rk_gave_up_ptr",
  "rk_gave_up_len",
  "rk_exp_backoff",
  "rk_answer",
  "rk_chaos_new",
  "rk_chaos_free",
  "rk_chaos_set",
  "rk_chaos_attempts",
  "rk_chaos_decide",
  "rk_chaos_out_ptr",
  "rk_timeline_begin",
  "rk_timeline_fault",
  "rk_timeline_finish",
  "rk_timeline_free",
  "rk_timeline_send",
  "rk_timeline_answer",
  "rk_timeline_out_ptr",
];

/** Decodes the module's base64 text (`atob`: Node >= 16 and every browser). */
export function decodeBase64(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
