//! Means, standard deviations and 95% intervals over seeds: the one place they are computed, for
//! `summary.json`, the table, sweeps and tests alike.
//!
//! ```
//! let (mean, half) = sim::stats::mean_ci95(&[1.0, 2.0, 3.0]);
//! assert_eq!(mean, 2.0);
//! assert!((half - 1.96 / 3f64.sqrt()).abs() < 1e-12);
//! ```

/// Mean of `xs` (0 for none).
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Mean and sample standard deviation (`n − 1` in the denominator; 0 for fewer than two values).
pub fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len();
    let m = mean(xs);
    if n < 2 {
        return (m, 0.0);
    }
    let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64;
    (m, var.sqrt())
}

/// Mean and the half-width of its normal-approximation 95% interval, `1.96 × sd ÷ √n` (0 for
/// fewer than two values).
pub fn mean_ci95(xs: &[f64]) -> (f64, f64) {
    let (m, sd) = mean_sd(xs);
    if xs.len() < 2 {
        return (m, 0.0);
    }
    (m, 1.96 * sd / (xs.len() as f64).sqrt())
}

/// The mean of `n` runs' counts summing to `sum`, rounded to the nearest integer (0 for no runs).
pub fn mean_count(sum: u64, n: usize) -> u64 {
    if n == 0 {
        return 0;
    }
    (sum as f64 / n as f64).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_and_spreads() {
        assert_eq!(mean_sd(&[]), (0.0, 0.0));
        assert_eq!(mean_sd(&[2.0]), (2.0, 0.0));
        let (m, sd) = mean_sd(&[1.0, 2.0, 3.0]);
        assert_eq!(m, 2.0);
        assert!((sd - 1.0).abs() < 1e-12);
        assert_eq!(mean_ci95(&[5.0]), (5.0, 0.0));
        assert_eq!(mean_count(5, 2), 3);
        assert_eq!(mean_count(7, 0), 0);
    }
}
