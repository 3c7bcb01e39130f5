//! The ratio budget against a plain reference model (a list of timestamped deposits and
//! withdrawals, summed over the live window), on random valid call sequences and random configs.
//!
//! Also: over any sequence inside one window, retries granted ≤ ratio × first tries + reserve, and
//! a retry is refused only when granting it would break that bound.
//!
//! `PROPTEST_CASES=5000 cargo test -p reliable-core --test budget_ratio_state_machine` is CI's long
//! pass.

mod common;

use common::{Machine, Model, live};
use proptest::prelude::*;
use proptest_state_machine::prop_state_machine;
use reliable_core::budget::{Budget, Denied, RatioBudget, RatioConfig, RatioPolicy};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};
use reliable_core::{Duration, Instant};

const SLOTS: usize = 8;
const M: u128 = 1_000_000;

#[derive(Clone, Debug)]
struct Ratio {
    ratio_micro: u128,
    min_per_sec: u32,
    ttl_ms: u64,
    slots: u32,
    /// (time, deposit, withdrawal) in millionths of a retry.
    events: Vec<(u64, u128, u128)>,
}

impl Ratio {
    fn width(&self) -> u64 {
        self.ttl_ms * 1_000_000 / u64::from(self.slots)
    }
    fn reserve(&self) -> u128 {
        u128::from(self.min_per_sec) * u128::from(self.ttl_ms) * 1_000
    }
    fn sums(&self, view: u64) -> (u128, u128) {
        self.events
            .iter()
            .filter(|e| live(e.0, view, self.width(), self.slots))
            .fold((0, 0), |(d, w), e| (d + e.1, w + e.2))
    }
}

impl Model for Ratio {
    type Budget = RatioBudget<SLOTS>;

    fn strategy() -> BoxedStrategy<Self> {
        (
            prop_oneof![
                Just(0u128),
                0..=3 * M,
                Just(M / 10),
                Just(6 * M / 10),
                Just(M)
            ],
            prop_oneof![Just(0u32), 0..=3u32],
            1_000..=60_000u64,
            1..=SLOTS as u32,
        )
            .prop_map(|(ratio_micro, min_per_sec, ttl_ms, slots)| Ratio {
                ratio_micro,
                min_per_sec,
                ttl_ms,
                slots,
                events: Vec::new(),
            })
            .boxed()
    }

    fn build(&self) -> RatioBudget<SLOTS> {
        let config = RatioConfig {
            ratio: self.ratio_micro as f64 / 1e6,
            min_per_sec: self.min_per_sec,
            ttl: Duration::from_millis(self.ttl_ms),
            slots: self.slots,
        };
        RatioBudget::new(RatioPolicy::new(config).unwrap()).unwrap()
    }

    fn width(&self) -> u64 {
        Ratio::width(self)
    }

    fn first_try(&mut self, latest: u64) {
        self.events.push((latest, self.ratio_micro, 0));
    }

    fn try_retry(&mut self, _: ErrorClass, latest: u64) -> Result<u32, Denied> {
        let (deposits, withdrawals) = self.sums(latest);
        if self.reserve() + deposits < withdrawals + M {
            return Err(Denied::Ratio);
        }
        self.events.push((latest, 0, M));
        Ok(0)
    }

    fn attempt_end(&mut self, _: AttemptOutcome, _: Option<u32>, _: u64) {}

    fn request_end(&mut self, _: u64) {}

    fn check(&self, budget: &RatioBudget<SLOTS>, now: Instant, view: u64) {
        let (deposits, withdrawals) = self.sums(view);
        let want = self.reserve() as i128 + deposits as i128 - withdrawals as i128;
        assert_eq!(budget.micro_balance(now), want, "balance at {now:?}");
    }
}

prop_state_machine! {
    #[test]
    fn ratio_budget_matches_the_model(sequential 1..150 => Machine<Ratio>);
}

proptest! {
    #[test]
    fn retries_never_exceed_ratio_times_first_tries_plus_reserve(
        ratio_micro in 0..=2_000_000u64,
        min_per_sec in 0..=3u32,
        // true: a first try; false: a retry is asked for. All within the first slot.
        ops in proptest::collection::vec((any::<bool>(), 0..100_000_000u64), 1..300),
    ) {
        let config = RatioConfig {
            ratio: ratio_micro as f64 / 1e6,
            min_per_sec,
            ttl: Duration::from_secs(10),
            slots: 10,
        };
        let mut budget: RatioBudget = RatioBudget::new(RatioPolicy::new(config).unwrap()).unwrap();
        // The reserve is min_per_sec × 10 s retries.
        let reserve = u128::from(min_per_sec) * 10 * 1_000_000;
        let (mut first_tries, mut granted) = (0u128, 0u128);
        for (first, at) in ops {
            let now = Instant::from_nanos(at);
            if first {
                budget.on_first_try(now);
                first_tries += 1;
                continue;
            }
            let bound = u128::from(ratio_micro) * first_tries + reserve;
            match budget.try_retry(ErrorClass::Transient, now) {
                Ok(_) => {
                    granted += 1;
                    prop_assert!(granted * 1_000_000 <= bound, "{granted} retries, bound {bound}");
                }
                // Refused only when one more would break the bound: the budget is exact.
                Err(_) => prop_assert!((granted + 1) * 1_000_000 > bound),
            }
        }
    }
}
