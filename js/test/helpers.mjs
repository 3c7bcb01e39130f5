// Shared by the tests: a clock the test moves by hand and a sleep that only records.
export function manualClock(start = 0) {
  const clock = () => clock.now;
  clock.now = start;
  return clock;
}

export function recordingSleep() {
  const sleep = async (ms) => {
    sleep.waits.push(ms);
  };
  sleep.waits = [];
  return sleep;
}
