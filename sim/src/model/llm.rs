//! The state of one [`LlmProvider`](crate::scenario::LlmProvider) in a run: per-key token
//! buckets for its rate limits, the requests generating now, what each key has spent.
//!
//! Rate limits are token buckets that refill continuously (as Anthropic documents): a bucket of
//! `limit` refilled at `limit` per minute. Requests and input tokens are taken when a request is
//! admitted; output tokens when they have been generated (a bucket may go into debt, and the key
//! is then refused until it refills). A refused request gets `retry-after`: whole seconds until
//! its bucket holds enough, at least 1.

use std::collections::BTreeMap;

use reliable_core::provider::{QuotaKind, QuotaUpdate};
use reliable_core::sample::splitmix64;
use reliable_core::spend::{Price, SpendConfig, SpendPolicy};
use reliable_core::{Duration, Instant};

use crate::engine::Handle;
use crate::engine::rng::{StreamId, derive};
use crate::scenario::LlmProvider as Spec;

const MINUTE_NS: f64 = 60e9;

/// One continuously refilled bucket (a per-minute limit).
#[derive(Clone, Copy, Debug)]
struct Bucket {
    limit: f64,
    level: f64,
    last: u64,
}

impl Bucket {
    fn new(limit: u64) -> Self {
        Bucket {
            limit: limit as f64,
            level: limit as f64,
            last: 0,
        }
    }
    fn refill(&mut self, now: u64) {
        let dt = now.saturating_sub(self.last) as f64;
        self.level = (self.level + dt * self.limit / MINUTE_NS).min(self.limit);
        self.last = self.last.max(now);
    }
    /// Whole seconds until the bucket holds `need` (at least 1).
    fn wait_secs(&self, need: f64) -> u64 {
        let missing = (need.min(self.limit) - self.level).max(0.0);
        ((missing * 60.0 / self.limit).ceil() as u64).max(1)
    }
    /// What the provider's headers would say: remaining now, refilled completely after.
    fn report(&self, kind: QuotaKind, now: Instant) -> QuotaUpdate {
        let missing = (self.limit - self.level).max(0.0);
        QuotaUpdate {
            kind,
            limit: Some(self.limit as u64),
            remaining: self.level.max(0.0) as u64,
            reset: now + Duration::from_secs_f64(missing * 60.0 / self.limit),
        }
    }
}

/// One key's limits and spend.
#[derive(Clone, Debug)]
struct Key {
    requests: Option<Bucket>,
    input: Option<Bucket>,
    output: Option<Bucket>,
    spent: u64,
    spend_limit: Option<u64>,
}

/// A job generating at the provider.
#[derive(Clone, Copy, Debug)]
struct Job {
    client: u32,
    input: u64,
    output: u64,
}

/// What the provider answers to a request at arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Admitted: it will answer after `work_ns`.
    Started {
        /// Generation time.
        work_ns: u64,
    },
    /// 429: a per-key rate limit, with `retry-after` in seconds.
    RateLimited {
        /// The delay sent back.
        retry_after_s: u64,
    },
    /// 529: overloaded.
    Overloaded,
    /// 429 with a money-limit body: the key's spend limit is reached.
    MoneyLimit,
}

/// One LLM provider's state in a run.
#[derive(Debug)]
pub struct LlmModel {
    spec: Spec,
    policy: SpendPolicy,
    seed: u64,
    ds: u16,
    keys: Vec<Key>,
    generating: u32,
    jobs: BTreeMap<(u32, u32), Job>,
}

impl LlmModel {
    /// The provider `spec` (downstream `ds`) for `clients` keys under master seed `seed`.
    pub fn new(spec: &Spec, ds: u16, clients: u32, seed: u64) -> Self {
        let keys = (0..clients)
            .map(|c| Key {
                requests: spec.rpm.map(Bucket::new),
                input: spec.itpm.map(Bucket::new),
                output: spec.otpm.map(Bucket::new),
                spent: 0,
                spend_limit: spec
                    .spend_limits
                    .iter()
                    .find(|l| l.client == c)
                    .map(|l| l.cost),
            })
            .collect();
        LlmModel {
            spec: spec.clone(),
            policy: pricing(spec.price),
            seed,
            ds,
            keys,
            generating: 0,
            jobs: BTreeMap::new(),
        }
    }

    /// The tokens of logical request `request` (its number, from 1): `(input, output)`, the same
    /// for every policy and every attempt.
    pub fn tokens(spec: &Spec, seed: u64, ds: u16, request: u64) -> (u64, u64) {
        let mut x = derive(seed, StreamId::Service(ds), request);
        let mut unit = || {
            x = splitmix64(x);
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let input = spec.input_tokens.draw(unit(), unit());
        let output = spec.output_tokens.draw(unit(), unit()).min(spec.max_tokens);
        (input, output)
    }

    /// The cost of `input` and `output` tokens, micro-units.
    pub fn cost(&self, input: u64, output: u64) -> u64 {
        self.policy.cost(input, output)
    }

    /// Request `request` of `client` arrives at `now` (`lost`: share of capacity lost to faults).
    pub fn arrive(
        &mut self,
        now: u64,
        attempt: Handle,
        client: u32,
        request: u64,
        lost: f64,
    ) -> Arrival {
        let (input, output) = Self::tokens(&self.spec, self.seed, self.ds, request);
        let n = self.keys.len().max(1);
        let Some(key) = self.keys.get_mut(client as usize % n) else {
            return Arrival::Overloaded;
        };
        if key.spend_limit.is_some_and(|l| key.spent >= l) {
            return Arrival::MoneyLimit;
        }
        let mut wait = 0u64;
        for (b, need) in [
            (&mut key.requests, 1.0),
            (&mut key.input, input as f64),
            (&mut key.output, 1.0),
        ] {
            if let Some(b) = b {
                b.refill(now);
                if b.level < need {
                    wait = wait.max(b.wait_secs(need));
                }
            }
        }
        if wait > 0 {
            return Arrival::RateLimited {
                retry_after_s: wait,
            };
        }
        let cap = (f64::from(self.spec.capacity) * (1.0 - lost)).floor() as u32;
        if self.generating >= cap {
            return Arrival::Overloaded;
        }
        if let Some(b) = &mut key.requests {
            b.level -= 1.0;
        }
        if let Some(b) = &mut key.input {
            b.level -= input as f64;
        }
        self.generating += 1;
        let unloaded = self.spec.first_token.as_nanos() as f64
            + output as f64 * self.spec.per_output_token.as_nanos() as f64;
        // Load relative to what is left of the capacity: a fleet that lost GPUs is slower per
        // request as well as smaller.
        let load = f64::from(self.generating) / f64::from(cap.max(1));
        let work_ns = (unloaded * (1.0 + self.spec.slowdown * load)) as u64;
        self.jobs.insert(
            (attempt.index, attempt.generation),
            Job {
                client,
                input,
                output,
            },
        );
        Arrival::Started { work_ns }
    }

    /// The job of `attempt` finished at `now`: the tokens are billed. Returns `(input, output,
    /// cost)`.
    pub fn finish(&mut self, now: u64, attempt: Handle) -> (u64, u64, u64) {
        let Some(job) = self.jobs.remove(&(attempt.index, attempt.generation)) else {
            return (0, 0, 0);
        };
        self.generating = self.generating.saturating_sub(1);
        let cost = self.cost(job.input, job.output);
        let n = self.keys.len().max(1);
        if let Some(key) = self.keys.get_mut(job.client as usize % n) {
            if let Some(b) = &mut key.output {
                b.refill(now);
                b.level -= job.output as f64;
            }
            key.spent = key.spent.saturating_add(cost);
        }
        (job.input, job.output, cost)
    }

    /// What the provider's rate-limit headers tell `client` at `now` (on the caller's clock).
    pub fn headers(&mut self, now: u64, client: u32) -> Vec<QuotaUpdate> {
        let n = self.keys.len().max(1);
        let Some(key) = self.keys.get_mut(client as usize % n) else {
            return Vec::new();
        };
        let at = Instant::from_nanos(now);
        let mut out = Vec::with_capacity(3);
        for (b, kind) in [
            (&mut key.requests, QuotaKind::Requests),
            (&mut key.input, QuotaKind::InputTokens),
            (&mut key.output, QuotaKind::OutputTokens),
        ] {
            if let Some(b) = b {
                b.refill(now);
                out.push(b.report(kind, at));
            }
        }
        out
    }

    /// Requests generating now.
    pub fn generating(&self) -> u32 {
        self.generating
    }
}

/// A spend policy that only prices tokens (the core's rounding, so client and provider agree).
pub fn pricing(price: Price) -> SpendPolicy {
    let config = SpendConfig {
        price,
        ..SpendConfig::new()
    };
    // A config with no ceilings is always valid.
    SpendPolicy::new(config).unwrap_or_else(|_| unreachable!("a price-only spend config is valid"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{SpendLimit, TokenDist};

    fn spec() -> Spec {
        Spec {
            input_tokens: TokenDist::Constant(1_000),
            output_tokens: TokenDist::Constant(200),
            max_tokens: 500,
            rpm: Some(2),
            itpm: None,
            otpm: Some(300),
            capacity: 2,
            first_token: Duration::from_millis(100),
            per_output_token: Duration::from_millis(10),
            slowdown: 1.0,
            price: Price::per_million_tokens(3_000_000, 15_000_000),
            spend_limits: vec![SpendLimit {
                client: 1,
                cost: 6_000,
            }],
        }
    }

    fn h(i: u32) -> Handle {
        Handle {
            index: i,
            generation: 0,
        }
    }

    #[test]
    fn limits_overload_billing_and_money() {
        let mut m = LlmModel::new(&spec(), 0, 2, 7);
        // Unloaded 100 ms + 200 × 10 ms = 2.1 s, stretched by 1 + 1 × 1/2 (one of two generating).
        assert_eq!(
            m.arrive(0, h(0), 0, 1, 0.0),
            Arrival::Started {
                work_ns: 3_150_000_000
            }
        );
        // Key 0's second request in the same minute is its last (rpm 2); the third waits 30 s for
        // half a minute of refill.
        assert!(matches!(
            m.arrive(0, h(1), 0, 2, 0.0),
            Arrival::Started { .. }
        ));
        assert_eq!(
            m.arrive(0, h(2), 0, 3, 0.0),
            Arrival::RateLimited { retry_after_s: 30 }
        );
        // Provider-wide: two generating is the capacity.
        assert_eq!(m.arrive(0, h(3), 1, 4, 0.0), Arrival::Overloaded);
        assert_eq!(m.finish(1, h(0)), (1_000, 200, 6_000));
        assert_eq!(m.finish(1, h(0)), (0, 0, 0), "billed once");
        // Key 1 spends its 6,000 limit on one request, then gets money answers.
        assert!(matches!(
            m.arrive(2, h(4), 1, 5, 0.0),
            Arrival::Started { .. }
        ));
        let _ = m.finish(3, h(4));
        assert_eq!(m.arrive(4, h(5), 1, 6, 0.0), Arrival::MoneyLimit);
        // Losing half the capacity leaves one slot, taken by key 0's second request.
        let mut m2 = LlmModel::new(&spec(), 0, 2, 7);
        assert!(matches!(
            m2.arrive(0, h(0), 0, 1, 0.5),
            Arrival::Started { .. }
        ));
        assert_eq!(m2.arrive(0, h(1), 1, 2, 0.5), Arrival::Overloaded);
        // The headers: requests and output-token buckets of key 0 after one admission.
        let q = m2.headers(0, 0);
        assert_eq!(q.len(), 2);
        assert_eq!(
            (q[0].kind, q[0].remaining, q[0].limit),
            (QuotaKind::Requests, 1, Some(2))
        );
        assert_eq!(q[0].reset, Instant::from_secs(30));
    }

    #[test]
    fn tokens_are_a_function_of_the_request_and_capped_at_max_tokens() {
        let mut s = spec();
        s.output_tokens = TokenDist::LogNormal {
            median: 400,
            sigma: 1.0,
        };
        let a: Vec<_> = (1..200).map(|r| LlmModel::tokens(&s, 9, 0, r)).collect();
        let b: Vec<_> = (1..200).map(|r| LlmModel::tokens(&s, 9, 0, r)).collect();
        assert_eq!(a, b);
        assert!(a.iter().all(|&(_, o)| o <= 500));
        assert!(a.iter().any(|&(_, o)| o == 500) && a.iter().any(|&(_, o)| o < 400));
    }
}
