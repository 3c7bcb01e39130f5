//! [`TokenBucket`]: tokens that first tries, successes, failures and retries move; a retry needs the
//! tokens past a threshold.

use super::{Budget, Denied, FixedThreshold, Grant, Threshold, micro_in};
use crate::error::{ConfigError, Problem, tri};
use crate::outcome::{AttemptOutcome, ErrorClass};
use crate::time::Instant;

/// Most tokens a bucket may hold.
const MAX_TOKENS: f64 = 1e9;

/// A token bucket. All amounts are in tokens (reals, exact to a millionth).
///
/// In RON: `(max_tokens: 10.0, success_credit: 0.1, failure_cost: 1.0, retry_when: Above(5.0))`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct TokenBucketConfig {
    /// Capacity, in (0, 10⁹].
    pub max_tokens: f64,
    /// Tokens at the start, in [0, max_tokens]. Default (`None`): full.
    #[cfg_attr(feature = "serde", serde(default))]
    pub initial_tokens: Option<f64>,
    /// Added when a first try is sent (Brooker 2022: 0.1). Default 0.
    #[cfg_attr(feature = "serde", serde(default))]
    pub first_try_credit: f64,
    /// Added when a request succeeds on its first try (gRPC's `token_ratio`). Default 0.
    #[cfg_attr(feature = "serde", serde(default))]
    pub success_credit: f64,
    /// Added when a request succeeds on a retry. Default (`None`): the same as `success_credit`
    /// (gRPC); Yandex's budget credits only first-try successes (`Some(0.0)`).
    #[cfg_attr(feature = "serde", serde(default))]
    pub retried_success_credit: Option<f64>,
    /// Taken for each failed attempt, first try or retry (gRPC: 1). Default 0.
    #[cfg_attr(feature = "serde", serde(default))]
    pub failure_cost: f64,
    /// Taken for each retry granted (Brooker, Yandex: 1). Default 0.
    #[cfg_attr(feature = "serde", serde(default))]
    pub retry_cost: f64,
    /// When a retry is allowed, compared with the tokens before the retry's cost is taken:
    /// `Above(x)` (tokens > x) or `AtLeast(x)` (tokens ≥ x).
    pub retry_when: Threshold,
}

impl TokenBucketConfig {
    /// gRPC retry throttling (proposal A6): starts full; each failed attempt takes 1 token, each
    /// successful request adds `token_ratio`; retries are allowed while tokens > `max_tokens / 2`.
    /// gRPC allows `max_tokens` in (0, 1000] and `token_ratio` > 0, three decimals.
    pub const fn grpc(max_tokens: f64, token_ratio: f64) -> Self {
        TokenBucketConfig {
            max_tokens,
            initial_tokens: None,
            first_try_credit: 0.0,
            success_credit: token_ratio,
            retried_success_credit: None,
            failure_cost: 1.0,
            retry_cost: 0.0,
            retry_when: Threshold::Above(max_tokens / 2.0),
        }
    }

    /// Brooker, "Fixing retries with token buckets and circuit breakers" (2022), per client:
    /// capacity 5, starts full, +0.1 per first try, a retry needs more than 1 token and costs 1.
    pub const fn brooker_2022() -> Self {
        TokenBucketConfig {
            max_tokens: 5.0,
            initial_tokens: None,
            first_try_credit: 0.1,
            success_credit: 0.0,
            retried_success_credit: None,
            failure_cost: 0.0,
            retry_cost: 1.0,
            retry_when: Threshold::Above(1.0),
        }
    }

    /// Yandex, "Good Retry, Bad Retry" (2024), the "10% retry budget" of its simulation: 30 tokens,
    /// starts full, +0.1 per request that succeeds on its first try (none for a success after
    /// retries), a retry needs at least 1 token and costs 1.
    pub const fn yandex_2024() -> Self {
        TokenBucketConfig {
            max_tokens: 30.0,
            initial_tokens: None,
            first_try_credit: 0.0,
            success_credit: 0.1,
            retried_success_credit: Some(0.0),
            failure_cost: 0.0,
            retry_cost: 1.0,
            retry_when: Threshold::AtLeast(1.0),
        }
    }
}

/// A validated [`TokenBucketConfig`], in millionths of a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenBucketPolicy {
    max: u64,
    initial: u64,
    first_try_credit: u64,
    success_credit: u64,
    retried_success_credit: u64,
    failure_cost: u64,
    retry_cost: u64,
    retry_when: FixedThreshold,
}

impl TokenBucketPolicy {
    /// Validates `config`. Errors name the field (`max_tokens`, `retry_when`, …).
    pub const fn new(config: TokenBucketConfig) -> Result<Self, ConfigError> {
        let max = tri!(micro_in("max_tokens", config.max_tokens, MAX_TOKENS));
        if max == 0 {
            return Err(ConfigError::new("max_tokens", Problem::Zero));
        }
        let initial = match config.initial_tokens {
            // At most max_tokens, so at most `max` once rounded.
            Some(t) => tri!(micro_in("initial_tokens", t, config.max_tokens)),
            None => max,
        };
        let first_try_credit = tri!(micro_in(
            "first_try_credit",
            config.first_try_credit,
            MAX_TOKENS
        ));
        let success_credit = tri!(micro_in(
            "success_credit",
            config.success_credit,
            MAX_TOKENS
        ));
        let retried_success_credit = match config.retried_success_credit {
            Some(c) => tri!(micro_in("retried_success_credit", c, MAX_TOKENS)),
            None => success_credit,
        };
        let failure_cost = tri!(micro_in("failure_cost", config.failure_cost, MAX_TOKENS));
        let retry_cost = tri!(micro_in("retry_cost", config.retry_cost, MAX_TOKENS));
        let retry_when = tri!(config.retry_when.to_ppm("retry_when", config.max_tokens));
        if !retry_when.passed_by(max as u128) {
            return Err(ConfigError::new(
                "retry_when",
                Problem::Inconsistent("even a full bucket could never retry"),
            ));
        }
        Ok(TokenBucketPolicy {
            max,
            initial,
            first_try_credit,
            success_credit,
            retried_success_credit,
            failure_cost,
            retry_cost,
            retry_when,
        })
    }
}

/// Tokens that first tries, successes, failures and retries move; a retry needs the
/// tokens past a threshold.
///
/// One general bucket expresses the published variants exactly:
///
/// | variant | moves | retry allowed when |
/// |---|---|---|
/// | gRPC A6 retry throttling ([`grpc`](TokenBucketConfig::grpc)) | success `+token_ratio`, failed attempt `−1` | tokens > `max_tokens / 2` |
/// | Brooker 2022 ([`brooker_2022`](TokenBucketConfig::brooker_2022)) | first try `+0.1`, retry `−1` | tokens > 1 |
/// | Yandex 2024, "10% budget" ([`yandex_2024`](TokenBucketConfig::yandex_2024)) | success of a first try `+0.1`, retry `−1` | tokens ≥ 1 |
///
/// Tokens live in `[0, max_tokens]` (movements saturate at both ends), in millionths of a token, so
/// `0.1` is exact. A failed attempt is one whose class [counts as a
/// failure](crate::outcome::ErrorClass::counts_as_failure) (every class but `Fatal`).
///
/// ```
/// use reliable_core::budget::{Budget, TokenBucket, TokenBucketConfig, TokenBucketPolicy};
/// use reliable_core::outcome::ErrorClass;
/// use reliable_core::Instant;
///
/// // Brooker 2022: capacity 5, starts full, +0.1 per first try, a retry needs > 1 and costs 1.
/// let mut bucket = TokenBucket::new(TokenBucketPolicy::new(TokenBucketConfig::brooker_2022())?);
/// let now = Instant::ZERO;
/// let mut granted = 0;
/// while let Ok(_grant) = bucket.try_retry(ErrorClass::Transient, now) {
///     granted += 1;
/// }
/// assert_eq!(granted, 4); // 5 -> 4 -> 3 -> 2 -> 1, and 1 is not more than 1
/// assert_eq!(bucket.tokens(), 1.0);
/// # Ok::<(), reliable_core::ConfigError>(())
/// ```
///
/// Owns its (small) policy; 80 bytes on 64-bit targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenBucket {
    policy: TokenBucketPolicy,
    tokens: u64,
}

impl TokenBucket {
    /// A bucket holding the policy's initial tokens.
    pub fn new(policy: TokenBucketPolicy) -> Self {
        TokenBucket {
            tokens: policy.initial,
            policy,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &TokenBucketPolicy {
        &self.policy
    }

    /// Tokens now (a real, for reports).
    pub fn tokens(&self) -> f64 {
        self.tokens as f64 / 1e6
    }

    /// Tokens now, in millionths of a token (exact).
    pub fn micro_tokens(&self) -> u64 {
        self.tokens
    }

    fn credit(&mut self, amount: u64) {
        self.tokens = self.tokens.saturating_add(amount).min(self.policy.max);
    }
}

impl Budget for TokenBucket {
    fn on_first_try(&mut self, _: Instant) {
        self.credit(self.policy.first_try_credit);
    }

    fn try_retry(&mut self, _: ErrorClass, _: Instant) -> Result<Grant, Denied> {
        if !self.policy.retry_when.passed_by(u128::from(self.tokens)) {
            return Err(Denied::Tokens);
        }
        self.tokens = self.tokens.saturating_sub(self.policy.retry_cost);
        Ok(Grant::new(0))
    }

    fn on_attempt_end(&mut self, outcome: AttemptOutcome, grant: Option<Grant>, _: Instant) {
        match outcome {
            AttemptOutcome::Success if grant.is_some() => {
                self.credit(self.policy.retried_success_credit);
            }
            AttemptOutcome::Success => self.credit(self.policy.success_credit),
            AttemptOutcome::Failed(class) if class.counts_as_failure() => {
                self.tokens = self.tokens.saturating_sub(self.policy.failure_cost);
            }
            AttemptOutcome::Failed(_) | AttemptOutcome::Cancelled => {}
        }
    }

    fn on_request_end(&mut self, _: Instant) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::ErrorClass::{Fatal, Transient};

    fn bucket(config: TokenBucketConfig) -> TokenBucket {
        TokenBucket::new(TokenBucketPolicy::new(config).unwrap())
    }

    const T: Instant = Instant::ZERO;

    #[derive(Clone, Copy, Debug)]
    enum Step {
        FirstTry,
        Retry(bool),
        Succeed(bool),
        Fail(bool),
        FailFatal,
    }

    /// Runs steps, asserting the tokens (in millionths) after each one.
    fn table(config: TokenBucketConfig, steps: &[(Step, u64)]) {
        let mut b = bucket(config);
        for (i, &(step, want)) in steps.iter().enumerate() {
            match step {
                Step::FirstTry => b.on_first_try(T),
                Step::Retry(granted) => {
                    let got = b.try_retry(Transient, T);
                    assert_eq!(got.is_ok(), granted, "step {i}: {step:?}");
                    if let Ok(g) = got {
                        b.on_attempt_end(AttemptOutcome::Cancelled, Some(g), T);
                    }
                }
                Step::Succeed(retried) => {
                    b.on_attempt_end(AttemptOutcome::Success, retried.then_some(Grant::new(0)), T);
                }
                Step::Fail(retried) => b.on_attempt_end(
                    AttemptOutcome::Failed(Transient),
                    retried.then_some(Grant::new(0)),
                    T,
                ),
                Step::FailFatal => b.on_attempt_end(AttemptOutcome::Failed(Fatal), None, T),
            }
            assert_eq!(b.micro_tokens(), want, "after step {i}: {step:?}");
        }
    }

    #[test]
    fn grpc_a6_step_by_step() {
        use Step::*;
        // max 10, ratio 0.1: failures take 1, successes add 0.1, retries only above 5.
        table(
            TokenBucketConfig::grpc(10.0, 0.1),
            &[
                (FirstTry, 10_000_000),
                (Fail(false), 9_000_000),
                (Retry(true), 9_000_000),
                (Fail(true), 8_000_000),
                (FailFatal, 8_000_000),
                (Fail(false), 7_000_000),
                (Fail(false), 6_000_000),
                (Fail(false), 5_000_000),
                (Retry(false), 5_000_000), // 5 is not above 5
                (Succeed(false), 5_100_000),
                (Retry(true), 5_100_000),
                (Succeed(true), 5_200_000), // a success after a retry still credits
                (Fail(false), 4_200_000),
                (Fail(false), 3_200_000),
                (Fail(false), 2_200_000),
                (Fail(false), 1_200_000),
                (Fail(false), 200_000),
                (Fail(false), 0), // floor at 0
            ],
        );
    }

    #[test]
    fn brooker_2022_step_by_step() {
        use Step::*;
        table(
            TokenBucketConfig::brooker_2022(),
            &[
                (FirstTry, 5_000_000), // full: the credit is lost
                (Retry(true), 4_000_000),
                (Retry(true), 3_000_000),
                (Retry(true), 2_000_000),
                (Fail(true), 2_000_000), // failures cost nothing
                (Retry(true), 1_000_000),
                (Retry(false), 1_000_000), // needs more than 1
                (FirstTry, 1_100_000),
                (Retry(true), 100_000),
                (Succeed(false), 100_000), // successes credit nothing
                (FirstTry, 200_000),
            ],
        );
    }

    #[test]
    fn yandex_2024_step_by_step() {
        use Step::*;
        let start = TokenBucketConfig {
            initial_tokens: Some(1.0),
            ..TokenBucketConfig::yandex_2024()
        };
        table(
            start,
            &[
                (FirstTry, 1_000_000),
                (Retry(true), 0), // at least 1 is enough
                (Retry(false), 0),
                (Succeed(true), 0), // a success after a retry credits nothing
                (Succeed(false), 100_000),
                (Retry(false), 100_000),
                (Succeed(false), 200_000),
            ],
        );
        // At 10% the bucket sustains one retry per ten first-try successes.
        let mut b = bucket(TokenBucketConfig {
            initial_tokens: Some(0.0),
            ..TokenBucketConfig::yandex_2024()
        });
        let mut retries = 0;
        for _ in 0..1_000 {
            b.on_attempt_end(AttemptOutcome::Success, None, T);
            if let Ok(g) = b.try_retry(Transient, T) {
                retries += 1;
                b.on_attempt_end(AttemptOutcome::Failed(Transient), Some(g), T);
            }
        }
        assert_eq!(retries, 100);
    }

    #[test]
    fn rejects_each_bad_field_by_name() {
        let base = TokenBucketConfig::grpc(10.0, 0.1);
        let field = |c: TokenBucketConfig| TokenBucketPolicy::new(c).unwrap_err().field;
        assert_eq!(
            field(TokenBucketConfig {
                max_tokens: 0.0,
                ..base
            }),
            "max_tokens"
        );
        assert_eq!(
            field(TokenBucketConfig {
                max_tokens: -1.0,
                ..base
            }),
            "max_tokens"
        );
        assert_eq!(
            field(TokenBucketConfig {
                max_tokens: f64::NAN,
                ..base
            }),
            "max_tokens"
        );
        assert_eq!(
            field(TokenBucketConfig {
                max_tokens: 2e9,
                ..base
            }),
            "max_tokens"
        );
        assert_eq!(
            field(TokenBucketConfig {
                initial_tokens: Some(11.0),
                ..base
            }),
            "initial_tokens"
        );
        assert_eq!(
            field(TokenBucketConfig {
                first_try_credit: -0.1,
                ..base
            }),
            "first_try_credit"
        );
        assert_eq!(
            field(TokenBucketConfig {
                success_credit: f64::INFINITY,
                ..base
            }),
            "success_credit"
        );
        assert_eq!(
            field(TokenBucketConfig {
                retried_success_credit: Some(-1.0),
                ..base
            }),
            "retried_success_credit"
        );
        assert_eq!(
            field(TokenBucketConfig {
                failure_cost: -1.0,
                ..base
            }),
            "failure_cost"
        );
        assert_eq!(
            field(TokenBucketConfig {
                retry_cost: f64::NAN,
                ..base
            }),
            "retry_cost"
        );
        assert_eq!(
            field(TokenBucketConfig {
                retry_when: Threshold::Above(10.0),
                ..base
            }),
            "retry_when"
        );
        assert_eq!(
            field(TokenBucketConfig {
                retry_when: Threshold::AtLeast(10.5),
                ..base
            }),
            "retry_when"
        );
        assert_eq!(
            field(TokenBucketConfig {
                retry_when: Threshold::Above(-1.0),
                ..base
            }),
            "retry_when"
        );
        // A full bucket at exactly the threshold may retry with AtLeast.
        TokenBucketPolicy::new(TokenBucketConfig {
            retry_when: Threshold::AtLeast(10.0),
            ..base
        })
        .unwrap();
        for c in [
            TokenBucketConfig::grpc(1000.0, 0.001),
            TokenBucketConfig::brooker_2022(),
            TokenBucketConfig::yandex_2024(),
        ] {
            TokenBucketPolicy::new(c).unwrap();
        }
    }
}
