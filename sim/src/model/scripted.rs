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
}

impl Scripted {
    /// A script.
    pub fn new(script: Vec<ScriptAnswer>, then: ScriptAnswer, latency_ns: u64) -> Self {
        Scripted {
            script,
            then,
            calls: 0,
            latency_ns,
        }
    }

    /// The answer to the next call.
    pub fn call(&mut self) -> ScriptAnswer {
        let a = usize::try_from(self.calls)
            .ok()
            .and_then(|i| self.script.get(i).copied())
            .unwrap_or(self.then);
        self.calls += 1;
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_follow_the_script_then_repeat() {
        use ScriptAnswer::*;
        let mut s = Scripted::new(vec![Ok, Ok, Error], Fatal, 0);
        let got: Vec<_> = (0..5).map(|_| s.call()).collect();
        assert_eq!(got, [Ok, Ok, Error, Fatal, Fatal]);
        assert_eq!(s.calls, 5);
    }
}
