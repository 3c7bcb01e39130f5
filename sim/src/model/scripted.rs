//! A scripted downstream: the `n`-th call gets the `n`-th answer of a list, every later call the
//! same final answer. Exact by construction, for tests such as the layered-stack exercise.

use crate::scenario::ScriptAnswer;

/// A scripted downstream's state.
#[derive(Clone, Debug)]
pub struct Scripted {
    script: Vec<ScriptAnswer>,
    then: ScriptAnswer,
    /// Calls answered so far.
    pub calls: u64,
    /// Time to answer, in nanoseconds.
    pub latency_ns: u64,
    /// Time to answer each of the first calls, in nanoseconds.
    latencies_ns: Vec<u64>,
}

impl Scripted {
    /// A script.
    pub fn new(script: Vec<ScriptAnswer>, then: ScriptAnswer, latency_ns: u64) -> Self {
        Scripted {
            script,
            then,
            calls: 0,
            latency_ns,
            latencies_ns: Vec::new(),
        }
    }

    /// With the time to answer each of the first calls, in nanoseconds.
    pub fn with_latencies(mut self, latencies_ns: Vec<u64>) -> Self {
        self.latencies_ns = latencies_ns;
        self
    }

    /// The answer to the next call and its latency (ns).
    pub fn call(&mut self) -> (ScriptAnswer, u64) {
        let i = usize::try_from(self.calls).ok();
        let a = i
            .and_then(|i| self.script.get(i).copied())
            .unwrap_or(self.then);
        let latency = i
            .and_then(|i| self.latencies_ns.get(i).copied())
            .unwrap_or(self.latency_ns);
        self.calls += 1;
        (a, latency)
    }

    /// The next call gets answer `n` (from 0) of the script: a driver that plays one list of
    /// answers per logical request moves to the next request's list.
    pub fn skip_to(&mut self, n: u64) {
        self.calls = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_follow_the_script_then_repeat() {
        use ScriptAnswer::*;
        let mut s = Scripted::new(vec![Ok, Ok, Error], Fatal, 7).with_latencies(vec![1, 2]);
        let got: Vec<_> = (0..5).map(|_| s.call()).collect();
        assert_eq!(got, [(Ok, 1), (Ok, 2), (Error, 7), (Fatal, 7), (Fatal, 7)]);
        assert_eq!(s.calls, 5);
        s.skip_to(1);
        assert_eq!(s.call(), (Ok, 2));
    }
}
