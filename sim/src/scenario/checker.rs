//! [`Checker`]: turns a problem at a field of a scenario into a [`ScenarioError`] at its
//! `file:line:col`, and the value rules every section shares (positive durations, shares, counts,
//! distributions, fault windows, unique printable names, the core's config errors). The checks of
//! a whole scenario, which use these, are the compile stage's.

use std::collections::HashMap;

use reliable_core::Duration;

use super::error::ScenarioError;
use super::locate::{Path, Seg, locate};
use super::types::Dist;

/// Turns a problem at a path into a [`ScenarioError`] at its file position.
pub(crate) struct Checker<'a> {
    text: &'a str,
    file: &'a str,
    /// The downstreams' names, quoted and joined, for "expected one of" messages.
    names: String,
    /// The stores' names, in order (a `Fleet` scope names one).
    stores: Vec<String>,
}

pub(crate) type Check = Result<(), ScenarioError>;

impl<'a> Checker<'a> {
    pub(crate) fn new(s: &super::Scenario, text: &'a str, file: &'a str) -> Self {
        let names = s
            .downstreams
            .iter()
            .take(20)
            .map(|d| format!("\"{}\"", super::escape(&d.name)))
            .collect::<Vec<_>>()
            .join(", ");
        let stores = s.stores.iter().map(|st| st.name.clone()).collect();
        Checker {
            text,
            file,
            names,
            stores,
        }
    }
}

impl Checker<'_> {
    /// `name` (of item `i` at `item`) is not empty and differs from every earlier name in `list`,
    /// whose first uses `seen` records (linear in the number of items).
    pub(crate) fn unique_name<'n>(
        &self,
        item: &Path,
        i: usize,
        name: &'n str,
        seen: &mut HashMap<&'n str, usize>,
        list: &str,
    ) -> Result<(), ScenarioError> {
        if name.trim().is_empty() {
            return Err(self.fail(&item.field("name"), "empty name"));
        }
        printable(self, &item.field("name"), name)?;
        match seen.insert(name, i) {
            Some(j) => Err(self.fail(
                &item.field("name"),
                format!(
                    "\"{}\" is already the name of {list}[{j}]: names must be unique",
                    super::escape(name)
                ),
            )),
            None => Ok(()),
        }
    }

    /// A checker for unit tests: no text, no file.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Checker<'static> {
        Checker {
            text: "",
            file: "test.ron",
            names: String::new(),
            stores: Vec::new(),
        }
    }

    /// The index of the store named `name`, or why there is none (at `at`).
    pub(crate) fn store(&self, name: &str, at: &Path) -> Result<u16, ScenarioError> {
        match self.stores.iter().position(|s| s == name) {
            Some(i) => Ok(i as u16),
            None => {
                let known: Vec<String> = self
                    .stores
                    .iter()
                    .take(20)
                    .map(|s| format!("\"{}\"", super::escape(s)))
                    .collect();
                Err(self.fail(
                    at,
                    format!(
                        "no store named \"{}\": expected one of the scenario's `stores` ({})",
                        super::escape(name),
                        if known.is_empty() {
                            "none declared".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                ))
            }
        }
    }

    /// The downstreams' names, for "expected one of" messages.
    pub(crate) fn downstream_names(&self) -> &str {
        &self.names
    }

    pub(crate) fn fail(&self, path: &Path, message: impl Into<String>) -> ScenarioError {
        ScenarioError::Invalid {
            path: self.file.to_string(),
            position: locate(self.text, path),
            field: path.to_string(),
            message: message.into(),
        }
    }

    pub(crate) fn non_negative_rate(&self, path: &Path, v: f64, what: &str) -> Check {
        if !v.is_finite() || v < 0.0 {
            return Err(self.fail(
                path,
                format!("{v} is not a valid {what}: expected a finite number >= 0"),
            ));
        }
        Ok(())
    }

    pub(crate) fn fraction(&self, path: &Path, v: f64, zero_ok: bool) -> Check {
        let ok = v.is_finite() && v <= 1.0 && (v > 0.0 || (zero_ok && v == 0.0));
        if !ok {
            let range = if zero_ok { "[0, 1]" } else { "(0, 1]" };
            return Err(self.fail(path, format!("{v} is not a share in {range}")));
        }
        Ok(())
    }

    pub(crate) fn positive(&self, path: &Path, d: Duration, what: &str) -> Check {
        if d.is_zero() {
            return Err(self.fail(path, format!("{what} must be longer than 0")));
        }
        Ok(())
    }

    pub(crate) fn count(&self, path: &Path, n: u64, max: u64, what: &str) -> Check {
        if n == 0 {
            return Err(self.fail(path, format!("0 {what}: expected at least 1")));
        }
        if n > max {
            return Err(self.fail(
                path,
                format!("{n} {what} is more than this simulator accepts ({max}); it would exhaust memory"),
            ));
        }
        Ok(())
    }

    pub(crate) fn dist(&self, path: &Path, d: &Dist, depth: usize) -> Check {
        if depth > 16 {
            return Err(self.fail(path, "distributions nested more than 16 deep"));
        }
        let day = Duration::from_secs(86_400);
        match d {
            Dist::Constant(_) => {}
            Dist::Exponential { mean } => {
                if *mean > day.saturating_mul(365) {
                    return Err(self.fail(
                        &path.field("mean"),
                        "a mean above a year is not a service or network time",
                    ));
                }
            }
            Dist::LogNormal { scale, mu, sigma } => {
                if !mu.is_finite() || mu.abs() > 50.0 {
                    return Err(self.fail(
                        &path.field("mu"),
                        format!("{mu}: expected a finite number in [-50, 50]"),
                    ));
                }
                if !sigma.is_finite() || *sigma < 0.0 || *sigma > 10.0 {
                    return Err(self.fail(
                        &path.field("sigma"),
                        format!("{sigma}: expected a finite number in [0, 10]"),
                    ));
                }
                let mean = scale.as_secs_f64() * (mu + sigma * sigma / 2.0).exp();
                if !mean.is_finite() || mean > 86_400.0 * 365.0 {
                    return Err(self.fail(path, format!("the mean of this distribution is {mean:.3e} s: expected something below a year")));
                }
            }
            Dist::Normal { .. } => {}
            Dist::Uniform { low, high } => {
                if low > high {
                    return Err(self.fail(
                        &path.field("high"),
                        format!("{high} is below low ({low}): expected low <= high"),
                    ));
                }
            }
            Dist::Choice(values) => {
                if values.is_empty() {
                    return Err(self.fail(path, "an empty Choice: expected at least one value"));
                }
                if values.len() > 10_000 {
                    return Err(self.fail(
                        path,
                        format!(
                            "a Choice of {} values: expected at most 10000",
                            values.len()
                        ),
                    ));
                }
            }
            Dist::Bimodal {
                slow_share,
                fast,
                slow,
            } => {
                self.fraction(&path.field("slow_share"), *slow_share, true)?;
                self.dist(&path.field("fast"), fast, depth + 1)?;
                self.dist(&path.field("slow"), slow, depth + 1)?;
            }
        }
        Ok(())
    }

    pub(crate) fn window(
        &self,
        path: &Path,
        from: Duration,
        until: Duration,
        horizon: Duration,
    ) -> Check {
        if from >= horizon {
            return Err(self.fail(
                &path.field("from"),
                format!(
                    "starts at {from}, at or after the horizon ({horizon}): it would never happen"
                ),
            ));
        }
        if until <= from {
            return Err(self.fail(
                &path.field("until"),
                format!("{until} is not after from ({from}): expected from < until"),
            ));
        }
        if until > horizon {
            return Err(self.fail(
                &path.field("until"),
                format!("{until} is after the horizon ({horizon}): expected until <= horizon (extend the horizon to see the recovery)"),
            ));
        }
        Ok(())
    }
}

/// A name shown on terminals and in reports must not hold control characters (escape sequences,
/// bidirectional overrides).
pub(crate) fn printable(c: &Checker<'_>, at: &Path, name: &str) -> Check {
    match name.chars().find(|&ch| super::hidden(ch)) {
        Some(ch) => Err(c.fail(
            at,
            format!(
                "\"{}\" contains the control character U+{:04X}: expected printable text",
                super::escape(name),
                u32::from(ch)
            ),
        )),
        None => Ok(()),
    }
}

impl Checker<'_> {
    /// A core [`ConfigError`](reliable_core::ConfigError) as a scenario error at `base` + its
    /// field.
    pub(crate) fn config_error(&self, base: &Path, e: reliable_core::ConfigError) -> ScenarioError {
        config_error(self, base, e)
    }
}

fn config_error(c: &Checker<'_>, base: &Path, e: reliable_core::ConfigError) -> ScenarioError {
    let mut path = base.clone();
    for part in e.field.split('.') {
        path.0.push(Seg::Field(part));
    }
    // Point at the field if it is written, else at the config itself.
    let position = locate(c.text, &path).or_else(|| locate(c.text, base));
    let problem = e.to_string();
    let problem = problem
        .strip_prefix(e.field)
        .and_then(|r| r.strip_prefix(": "))
        .unwrap_or(&problem)
        .to_string();
    ScenarioError::Invalid {
        path: c.file.to_string(),
        position,
        field: path.to_string(),
        message: problem,
    }
}
