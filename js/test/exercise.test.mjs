// The layered-stack exercise's 12-row table: a fallback over [breaker(retry(primary)),
// retry(backup)], five simulated seconds between requests, the primary failing on its 3rd to 8th
// calls. The exercise's breaker opens after 2 failed requests in a row for 20 s and then lets one
// trial through; in the seed's terms that is a window of 2 with failureRate 1 and probe 1.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CircuitBreaker, CircuitOpenError, reliable } from "../dist/esm/entry.esm.js";
import { manualClock } from "./helpers.mjs";

const EXPECTED = `
request time breaker    answered by                primary calls
       1   5s closed     breaker(retry(primary))    1
       2  10s closed     breaker(retry(primary))    2
       3  15s closed     retry(backup)              4
       4  20s closed     retry(backup)              6
       5  25s open       retry(backup)              6
       6  30s open       retry(backup)              6
       7  35s open       retry(backup)              6
       8  40s half-open  retry(backup)              8
       9  45s open       retry(backup)              8
      10  50s open       retry(backup)              8
      11  55s open       retry(backup)              8
      12  60s half-open  breaker(retry(primary))    9`;

/** A provider answering from a script: a string is a reply, an Error is thrown. */
function scripted(name, script) {
  const provider = async () => {
    const next = script[provider.calls++];
    if (next instanceof Error) throw next;
    return next;
  };
  provider.calls = 0;
  return provider;
}

test("the exercise's 12-row table, under an injected clock", async () => {
  const clock = manualClock();
  const noSleep = async () => {};
  const primary = scripted("primary", [
    ...Array(2).fill("primary ok"),
    ...Array(6).fill(new Error("down")),
    ...Array(20).fill("primary ok"),
  ]);
  const backup = scripted("backup", Array(20).fill("backup ok"));
  const breaker = new CircuitBreaker({ failureRate: 1, window: 2, cooldown: 20_000, probe: 1, clock });
  const retry = (fn) => reliable(fn, { maxAttempts: 2, sleep: noSleep, timeout: Infinity, clock });
  const retryPrimary = retry(primary);
  const layers = [
    { name: "breaker(retry(primary))", call: reliable(() => retryPrimary(), { breaker, maxAttempts: 1, timeout: Infinity }) },
    { name: "retry(backup)", call: retry(backup) },
  ];
  const fallback = async () => {
    let last;
    for (const layer of layers) {
      try {
        await layer.call();
        return layer.name;
      } catch (e) {
        last = e;
      }
    }
    throw last;
  };
  const rows = ["request time breaker    answered by                primary calls"];
  for (let n = 1; n <= 12; n++) {
    clock.now = n * 5000;
    const before = breaker.state;
    const servedBy = await fallback();
    rows.push(
      `${String(n).padStart(8)} ${String(n * 5).padStart(3)}s ${before.padEnd(10)} ${servedBy.padEnd(26)} ${primary.calls}`,
    );
  }
  assert.equal("\n" + rows.join("\n"), EXPECTED);
});

test("an open breaker in the stack fails fast with CircuitOpenError", async () => {
  const clock = manualClock();
  const b = new CircuitBreaker({ failureRate: 1, window: 2, cooldown: 20_000, probe: 1, clock });
  const f = reliable(async () => {
    throw new Error("down");
  }, { breaker: b, maxAttempts: 1, timeout: Infinity });
  await assert.rejects(f());
  await assert.rejects(f());
  clock.now = 5000;
  await assert.rejects(f(), (e) => e instanceof CircuitOpenError && e.retryAfter === 15_000);
});
