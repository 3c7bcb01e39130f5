"""Work no timer can stop (a blocking call with no timeout of its own): each attempt runs in the
caller's thread, and an answer after the timeout is kept, not thrown away and retried."""

import threading
import time

from reliable import CallRecord, reliable

records: list[CallRecord] = []


@reliable(timeout=0.05, max_attempts=3, uninterruptible=True, on_call=records.append)
def legacy_report(day: str) -> str:
    time.sleep(0.2)  # a client with no timeout of its own: 4 times the attempt's timeout
    return f"report for {day}"


assert legacy_report("monday") == "report for monday"
assert records[-1].attempts == 1  # the late answer is the call's: no retry, no second copy
assert threading.active_count() == 1  # no thread left running behind the caller's back
print(records[-1])
