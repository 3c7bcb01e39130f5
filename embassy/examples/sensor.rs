//! A sensor read over a flaky bus, through `reliable-embassy`: a breaker, three attempts of at most
//! 50 ms each with jittered backoff between them, retries paid from a token bucket. On a board this
//! is an embassy task; here `main` runs it on the host, with embassy-time's mock driver standing in
//! for the board's timer (`cargo run -p reliable-embassy --example sensor`).
use core::cell::Cell;
use core::pin::pin;
use core::task::{Context, Poll, Waker};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Wake;

// README:begin
use embassy_time::Timer;
use reliable_core::backoff::{BackoffConfig, Jitter};
use reliable_core::breaker::{BreakerConfig, BreakerPolicy, CircuitBreaker, CountWindow};
use reliable_core::budget::{TokenBucket, TokenBucketConfig, TokenBucketPolicy};
use reliable_core::engine::Plan;
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{RetryConfig, RetryPolicy};
use reliable_core::{ConfigError, Duration};
use reliable_embassy::{EmbassyClock, Error, Reliable, State};

#[derive(Debug)]
enum BusError {
    /// The sensor held the bus: worth another try.
    Busy,
    /// The sensor did not acknowledge its address: retrying will not help.
    Nack,
}

type Breaker = CircuitBreaker<BreakerPolicy, CountWindow<20>>;
type Sensor = Reliable<State<Breaker, TokenBucket>, EmbassyClock>;

/// The policies, validated once: an invalid one is an error naming the field, never a panic later.
fn sensor(seed: u64) -> Result<Sensor, ConfigError> {
    let breaker = CircuitBreaker::with_storage(BreakerPolicy::new(BreakerConfig::reliablekit())?)?;
    let plan = Plan::new(RetryPolicy::new(RetryConfig {
        max_attempts: Some(3),
        attempt_timeout: Some(Duration::from_millis(50)),
        ..RetryConfig::new(BackoffConfig::exponential(
            Duration::from_millis(20),
            2.0,
            Duration::from_millis(500),
            Jitter::Full,
        ))
    })?);
    let budget = TokenBucket::new(TokenBucketPolicy::new(TokenBucketConfig::brooker_2022())?);
    // Each device its own seed, so a fleet that fails together does not retry together.
    let state = State::new(breaker, budget, seed);
    Ok(Reliable::new(state, plan, EmbassyClock))
}

/// One reading, or why there is none. An attempt that overruns its 50 ms is dropped: the bus
/// transaction in it is cancelled there and then.
async fn read_temperature(
    sensor: &Sensor,
    bus: &impl Fn() -> Result<i16, BusError>,
) -> Option<i16> {
    let classify = |e: &BusError| match e {
        BusError::Busy => ErrorClass::Transient,
        BusError::Nack => ErrorClass::Fatal,
    };
    let reading = sensor
        .call(classify, || async {
            Timer::after_millis(5).await; // the transaction's time on the bus
            bus()
        })
        .await;
    match reading {
        Ok(celsius) => Some(celsius),
        // The breaker is open: nothing more was sent; sleep until it lets a call through again.
        Err(e @ Error::Open { .. }) => {
            let wait = e.retry_after().unwrap_or(Duration::from_secs(1));
            Timer::after_micros(wait.as_micros()).await;
            None
        }
        Err(_) => None,
    }
}
// README:end

/// Records that the task asked to be polled again.
struct Woken(AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Polls `fut` on the host: again at once when it asked to be (its copies start at the next
/// poll), else after moving the mock clock 1 ms.
fn block_on<F: Future>(fut: F) -> F::Output {
    let woken = Arc::new(Woken(AtomicBool::new(false)));
    let waker = Waker::from(Arc::clone(&woken));
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(&waker);
    loop {
        woken.0.store(false, Ordering::SeqCst);
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        if !woken.0.load(Ordering::SeqCst) {
            embassy_time::MockDriver::get().advance(embassy_time::Duration::from_millis(1));
        }
    }
}

fn main() -> Result<(), ConfigError> {
    let sensor = sensor(0x5EED)?;
    // The bus is busy on every other transaction, and the sensor is gone after the sixth.
    let transactions = Cell::new(0u32);
    let bus = || {
        transactions.set(transactions.get() + 1);
        match transactions.get() {
            n if n > 6 => Err(BusError::Nack),
            n if n % 2 == 1 => Err(BusError::Busy),
            _ => Ok(21),
        }
    };
    for _ in 0..4 {
        let start = embassy_time::Instant::now();
        let reading = block_on(read_temperature(&sensor, &bus));
        let took = embassy_time::Instant::now() - start;
        println!(
            "{reading:?} after {} ms of bus time and backoff",
            took.as_millis()
        );
    }
    println!("{} transactions", transactions.get());
    Ok(())
}
