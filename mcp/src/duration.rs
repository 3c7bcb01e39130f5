//! Durations in tool arguments are human strings ("200ms", "1.5s", "2m"), parsed by reliable-core
//! as in the simulator's scenario files.

use reliable_core::Duration;

/// `text` parsed, `default` when absent, or an error naming `field`.
pub fn parse_duration(
    field: &str,
    text: Option<&str>,
    default: Duration,
) -> Result<Duration, String> {
    match text {
        None => Ok(default),
        Some(t) => t.trim().parse::<Duration>().map_err(|e| {
            format!(
                "{field}: {} is not a duration like \"200ms\" or \"1.5s\" ({e})",
                crate::echo::quoted(t)
            )
        }),
    }
}

/// Milliseconds, with sub-millisecond precision.
pub fn ms(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}
