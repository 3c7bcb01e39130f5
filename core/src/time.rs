//! Virtual time: [`Instant`] and [`Duration`], both `u64` nanoseconds.
//!
//! The core never reads a clock. Callers pass `now` into every call, from whatever clock they have: a
//! hardware timer on a microcontroller, `std::time::Instant` on a server (as nanoseconds since a start
//! point), or the simulator's virtual clock. All arithmetic saturates, so no input makes it panic, and
//! `u64` nanoseconds last 584 years from whatever origin the caller picks.
//!
//! Durations have a human text form used by [`Display`](core::fmt::Display), [`FromStr`] and serde:
//! `"30s"`, `"150ms"`, `"2.5s"`, `"1m30s"`, `"250us"`, `"10ns"`, `"1h"`.
//!
//! ```
//! use reliable_core::{Duration, Instant};
//!
//! let start = Instant::from_millis(1_000);
//! let later = start + Duration::from_millis(250);
//! assert_eq!(later.saturating_duration_since(start), Duration::from_millis(250));
//! // Saturating: an earlier instant minus a later one is zero, never a panic.
//! assert_eq!(start.saturating_duration_since(later), Duration::ZERO);
//! assert_eq!("1m30s".parse::<Duration>(), Ok(Duration::from_secs(90)));
//! assert_eq!(Duration::from_millis(1_500).to_string(), "1.5s");
//! ```

use core::fmt;
use core::ops::{Add, AddAssign, Sub, SubAssign};
use core::str::FromStr;

const NANOS_PER_MICRO: u64 = 1_000;
const NANOS_PER_MILLI: u64 = 1_000_000;
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// A span of time in whole nanoseconds. Arithmetic saturates at zero and at [`Duration::MAX`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(u64);

/// A point in time: nanoseconds since an origin the caller chooses. Arithmetic saturates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration(0);
    /// The longest representable duration (about 584 years); also used as "never".
    pub const MAX: Duration = Duration(u64::MAX);

    /// A duration of `nanos` nanoseconds.
    pub const fn from_nanos(nanos: u64) -> Self {
        Duration(nanos)
    }
    /// A duration of `micros` microseconds, saturating.
    pub const fn from_micros(micros: u64) -> Self {
        Duration(micros.saturating_mul(NANOS_PER_MICRO))
    }
    /// A duration of `millis` milliseconds, saturating.
    pub const fn from_millis(millis: u64) -> Self {
        Duration(millis.saturating_mul(NANOS_PER_MILLI))
    }
    /// A duration of `secs` seconds, saturating.
    pub const fn from_secs(secs: u64) -> Self {
        Duration(secs.saturating_mul(NANOS_PER_SEC))
    }
    /// A duration from floating-point seconds, rounded to the nearest nanosecond. Negative and NaN
    /// inputs give zero; values too large saturate. Meant for configs, not for hot paths.
    pub fn from_secs_f64(secs: f64) -> Self {
        let nanos = secs * NANOS_PER_SEC as f64 + 0.5;
        // `as` saturates on overflow and maps NaN to 0.
        Duration(if nanos > 0.0 { nanos as u64 } else { 0 })
    }
    /// Whole nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Whole microseconds (truncated).
    pub const fn as_micros(self) -> u64 {
        self.0 / NANOS_PER_MICRO
    }
    /// Whole milliseconds (truncated).
    pub const fn as_millis(self) -> u64 {
        self.0 / NANOS_PER_MILLI
    }
    /// Whole seconds (truncated).
    pub const fn as_secs(self) -> u64 {
        self.0 / NANOS_PER_SEC
    }
    /// Seconds as a float, for reports.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NANOS_PER_SEC as f64
    }
    /// `true` for [`Duration::ZERO`].
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
    /// `self + rhs`, saturating at [`Duration::MAX`].
    pub const fn saturating_add(self, rhs: Duration) -> Duration {
        Duration(self.0.saturating_add(rhs.0))
    }
    /// `self - rhs`, saturating at zero.
    pub const fn saturating_sub(self, rhs: Duration) -> Duration {
        Duration(self.0.saturating_sub(rhs.0))
    }
    /// `self * rhs`, saturating at [`Duration::MAX`].
    pub const fn saturating_mul(self, rhs: u64) -> Duration {
        Duration(self.0.saturating_mul(rhs))
    }
    /// `self + rhs`, or `None` on overflow.
    pub const fn checked_add(self, rhs: Duration) -> Option<Duration> {
        match self.0.checked_add(rhs.0) {
            Some(n) => Some(Duration(n)),
            None => None,
        }
    }
    /// The smaller of two durations (usable in `const` contexts).
    pub const fn min_const(self, other: Duration) -> Duration {
        if self.0 <= other.0 { self } else { other }
    }
}

impl Instant {
    /// The origin.
    pub const ZERO: Instant = Instant(0);
    /// The last representable instant; also used as "never".
    pub const MAX: Instant = Instant(u64::MAX);

    /// The instant `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Self {
        Instant(nanos)
    }
    /// The instant `micros` microseconds after the origin, saturating.
    pub const fn from_micros(micros: u64) -> Self {
        Instant(micros.saturating_mul(NANOS_PER_MICRO))
    }
    /// The instant `millis` milliseconds after the origin, saturating.
    pub const fn from_millis(millis: u64) -> Self {
        Instant(millis.saturating_mul(NANOS_PER_MILLI))
    }
    /// The instant `secs` seconds after the origin, saturating.
    pub const fn from_secs(secs: u64) -> Self {
        Instant(secs.saturating_mul(NANOS_PER_SEC))
    }
    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Time since the origin, as a [`Duration`].
    pub const fn since_origin(self) -> Duration {
        Duration(self.0)
    }
    /// `self - earlier`, or zero if `earlier` is later than `self` (a clock that stepped back).
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
    /// `self + d`, saturating at [`Instant::MAX`].
    pub const fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
    /// `self - d`, saturating at [`Instant::ZERO`].
    pub const fn saturating_sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d.0))
    }
    /// `self + d`, or `None` on overflow.
    pub const fn checked_add(self, d: Duration) -> Option<Instant> {
        match self.0.checked_add(d.0) {
            Some(n) => Some(Instant(n)),
            None => None,
        }
    }
}

impl Add<Duration> for Duration {
    type Output = Duration;
    fn add(self, rhs: Duration) -> Duration {
        self.saturating_add(rhs)
    }
}
impl AddAssign<Duration> for Duration {
    fn add_assign(&mut self, rhs: Duration) {
        *self = self.saturating_add(rhs);
    }
}
impl Sub<Duration> for Duration {
    type Output = Duration;
    fn sub(self, rhs: Duration) -> Duration {
        self.saturating_sub(rhs)
    }
}
impl SubAssign<Duration> for Duration {
    fn sub_assign(&mut self, rhs: Duration) {
        *self = self.saturating_sub(rhs);
    }
}
impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        self.saturating_add(rhs)
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = self.saturating_add(rhs);
    }
}
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        self.saturating_sub(rhs)
    }
}
impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl From<core::time::Duration> for Duration {
    /// Saturates at [`Duration::MAX`] (about 584 years).
    fn from(d: core::time::Duration) -> Self {
        Duration(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}
impl From<Duration> for core::time::Duration {
    fn from(d: Duration) -> Self {
        core::time::Duration::from_nanos(d.0)
    }
}

impl fmt::Display for Duration {
    /// The shortest exact human form: `1.5s`, `150ms`, `0ns`. Parses back to the same value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (unit, name) = if self.0 >= NANOS_PER_SEC {
            (NANOS_PER_SEC, "s")
        } else if self.0 >= NANOS_PER_MILLI {
            (NANOS_PER_MILLI, "ms")
        } else if self.0 >= NANOS_PER_MICRO {
            (NANOS_PER_MICRO, "us")
        } else {
            (1, "ns")
        };
        let whole = self.0 / unit;
        let mut frac = self.0 % unit;
        write!(f, "{whole}")?;
        if frac != 0 {
            // Print the fraction with as many digits as the unit has, minus trailing zeros.
            let mut digits = unit.ilog10();
            while frac.is_multiple_of(10) {
                frac /= 10;
                digits -= 1;
            }
            write!(f, ".{frac:0width$}", width = digits as usize)?;
        }
        f.write_str(name)
    }
}

/// Why a duration string was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseDurationError {
    /// The string was empty or only white space.
    Empty,
    /// A number was expected (at this byte offset).
    ExpectedNumber(usize),
    /// A number had no unit after it (at this byte offset), e.g. `"30"` instead of `"30s"`.
    MissingUnit(usize),
    /// The unit starting at this byte offset is not one of `ns us µs ms s m min h`.
    UnknownUnit(usize),
    /// The value does not fit in 584 years of nanoseconds.
    Overflow,
}

impl fmt::Display for ParseDurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const HINT: &str = "expected a duration such as \"30s\", \"150ms\", \"2.5s\" or \"1m30s\"";
        match self {
            ParseDurationError::Empty => write!(f, "empty duration: {HINT}"),
            ParseDurationError::ExpectedNumber(at) => {
                write!(f, "expected a number at byte {at}: {HINT}")
            }
            ParseDurationError::MissingUnit(at) => {
                write!(
                    f,
                    "missing unit at byte {at} (one of ns, us, ms, s, m, h): {HINT}"
                )
            }
            ParseDurationError::UnknownUnit(at) => {
                write!(
                    f,
                    "unknown unit at byte {at} (expected one of ns, us, ms, s, m, min, h): {HINT}"
                )
            }
            ParseDurationError::Overflow => {
                write!(f, "duration too large (the limit is about 584 years)")
            }
        }
    }
}

impl core::error::Error for ParseDurationError {}

impl FromStr for Duration {
    type Err = ParseDurationError;

    /// Parses one or more `<number><unit>` terms (`"1m30s"`), with decimals allowed (`"2.5s"`) and
    /// spaces allowed between terms and before a unit. Fractions finer than a nanosecond are truncated.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bytes = s.as_bytes();
        let at = |i: usize| bytes.get(i).copied().unwrap_or(0);
        let digit = |i: usize| at(i).is_ascii_digit();
        let mut i = 0;
        let mut total: u64 = 0;
        let mut terms = 0;
        loop {
            while at(i).is_ascii_whitespace() {
                i += 1;
            }
            if i >= bytes.len() {
                break;
            }
            // Number: digits, optionally a '.' and more digits.
            let start = i;
            let mut whole: u64 = 0;
            let mut digits = 0;
            while digit(i) {
                whole = whole
                    .checked_mul(10)
                    .and_then(|w| w.checked_add(u64::from(at(i) - b'0')))
                    .ok_or(ParseDurationError::Overflow)?;
                i += 1;
                digits += 1;
            }
            let mut frac_num: u64 = 0;
            let mut frac_den: u64 = 1;
            if at(i) == b'.' {
                i += 1;
                while digit(i) {
                    // Beyond 18 digits nothing changes at nanosecond resolution.
                    if frac_den < 1_000_000_000_000_000_000 {
                        frac_num = frac_num * 10 + u64::from(at(i) - b'0');
                        frac_den *= 10;
                    }
                    i += 1;
                    digits += 1;
                }
            }
            if digits == 0 {
                return Err(ParseDurationError::ExpectedNumber(start));
            }
            while at(i) == b' ' {
                i += 1;
            }
            let unit_start = i;
            while i < bytes.len() && !digit(i) && !at(i).is_ascii_whitespace() && at(i) != b'.' {
                i += 1;
            }
            let unit = match s.get(unit_start..i) {
                Some("") => return Err(ParseDurationError::MissingUnit(unit_start)),
                Some("ns") => 1,
                Some("us" | "µs") => NANOS_PER_MICRO,
                Some("ms") => NANOS_PER_MILLI,
                Some("s") => NANOS_PER_SEC,
                Some("m" | "min") => 60 * NANOS_PER_SEC,
                Some("h") => 3_600 * NANOS_PER_SEC,
                _ => return Err(ParseDurationError::UnknownUnit(unit_start)),
            };
            let whole_ns = whole
                .checked_mul(unit)
                .ok_or(ParseDurationError::Overflow)?;
            // frac_num < frac_den <= 10^18 and unit <= 3.6e12: u128 cannot overflow.
            // `max(1)`: frac_den >= 1 already; it keeps a division-by-zero panic path out.
            let frac_ns =
                (u128::from(frac_num) * u128::from(unit) / u128::from(frac_den.max(1))) as u64;
            total = total
                .checked_add(whole_ns)
                .and_then(|t| t.checked_add(frac_ns))
                .ok_or(ParseDurationError::Overflow)?;
            terms += 1;
        }
        if terms == 0 {
            return Err(ParseDurationError::Empty);
        }
        Ok(Duration(total))
    }
}

#[cfg(feature = "serde")]
mod serde_impl {
    use super::Duration;
    use core::fmt::{self, Write};
    use serde::de::{self, Visitor};

    /// A fixed stack buffer: lets `Display` output be serialised without allocating.
    struct StackStr {
        buf: [u8; 48],
        len: usize,
    }
    impl Write for StackStr {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
            self.buf
                .get_mut(self.len..end)
                .ok_or(fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }

    impl serde::Serialize for Duration {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let mut s = StackStr {
                buf: [0; 48],
                len: 0,
            };
            write!(s, "{self}").map_err(serde::ser::Error::custom)?;
            // Only ASCII was written.
            let text = s
                .buf
                .get(..s.len)
                .and_then(|b| core::str::from_utf8(b).ok())
                .unwrap_or_default();
            serializer.serialize_str(text)
        }
    }

    struct DurationVisitor;
    impl Visitor<'_> for DurationVisitor {
        type Value = Duration;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a duration string such as \"30s\", \"150ms\", \"2.5s\" or \"1m30s\"")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
            v.parse()
                .map_err(|e| E::custom(format_args!("invalid duration \"{v}\": {e}")))
        }
    }

    impl<'de> serde::Deserialize<'de> for Duration {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
            deserializer.deserialize_str(DurationVisitor)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_human_forms() {
        let cases = [
            ("30s", Duration::from_secs(30)),
            ("150ms", Duration::from_millis(150)),
            ("2.5s", Duration::from_millis(2_500)),
            ("1m30s", Duration::from_secs(90)),
            ("1m 30s", Duration::from_secs(90)),
            ("1 h", Duration::from_secs(3_600)),
            ("250us", Duration::from_micros(250)),
            ("250µs", Duration::from_micros(250)),
            ("10ns", Duration::from_nanos(10)),
            ("0.1ms", Duration::from_micros(100)),
            (".5s", Duration::from_millis(500)),
            ("2min", Duration::from_secs(120)),
            ("0s", Duration::ZERO),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<Duration>(), Ok(want), "{text}");
        }
    }

    #[test]
    fn rejects_bad_forms_with_a_reason() {
        assert_eq!("".parse::<Duration>(), Err(ParseDurationError::Empty));
        assert_eq!(
            "30".parse::<Duration>(),
            Err(ParseDurationError::MissingUnit(2))
        );
        assert_eq!(
            "30 parsecs".parse::<Duration>(),
            Err(ParseDurationError::UnknownUnit(3))
        );
        assert_eq!(
            "s".parse::<Duration>(),
            Err(ParseDurationError::ExpectedNumber(0))
        );
        assert_eq!(
            "-3s".parse::<Duration>(),
            Err(ParseDurationError::ExpectedNumber(0))
        );
        assert_eq!(
            "99999999999h".parse::<Duration>(),
            Err(ParseDurationError::Overflow)
        );
        assert_eq!(
            "18446744073709551616ns".parse::<Duration>(),
            Err(ParseDurationError::Overflow)
        );
    }

    #[test]
    fn display_round_trips() {
        for nanos in [
            0,
            1,
            999,
            1_000,
            1_500,
            150_000_000,
            1_500_000_000,
            90_000_000_000,
            123_456_789_012,
            u64::MAX,
        ] {
            let d = Duration::from_nanos(nanos);
            let mut buf = heapless::String::<48>::new();
            core::fmt::write(&mut buf, format_args!("{d}")).unwrap();
            assert_eq!(buf.parse::<Duration>(), Ok(d), "{buf}");
        }
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(Instant::ZERO - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(Instant::ZERO - Instant::MAX, Duration::ZERO);
        assert_eq!(Duration::from_secs(u64::MAX), Duration::MAX);
        assert_eq!(Duration::MAX.saturating_mul(2), Duration::MAX);
        assert_eq!(Duration::from_secs_f64(-1.0), Duration::ZERO);
        assert_eq!(Duration::from_secs_f64(f64::NAN), Duration::ZERO);
        assert_eq!(Duration::from_secs_f64(1e300), Duration::MAX);
        assert_eq!(Duration::from_secs_f64(0.15), Duration::from_millis(150));
    }
}
