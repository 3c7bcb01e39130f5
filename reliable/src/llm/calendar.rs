//! Wall-clock dates without a date crate: RFC 3339 timestamps (Anthropic's rate-limit resets) and
//! the start of next month (Anthropic's monthly spend cap), in UTC, on the proleptic Gregorian
//! calendar (Howard Hinnant's `days_from_civil` and `civil_from_days`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 of `y-m-d`.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `(year, month)` of the day `days` since 1970-01-01.
fn year_month(days: i64) -> (i64, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m)
}

/// How long from `now` until 00:00 UTC on the first day of the next month.
pub(super) fn until_next_month(now: SystemTime) -> Option<Duration> {
    let secs = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    let (y, m) = year_month(i64::try_from(secs / 86_400).ok()?);
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    let start = u64::try_from(days_from_civil(ny, nm, 1)).ok()? * 86_400;
    (UNIX_EPOCH + Duration::from_secs(start))
        .duration_since(now)
        .ok()
}

/// Parses an RFC 3339 timestamp (`2025-08-21T12:40:59Z`, `2025-08-21T12:40:59.5+02:00`).
pub(super) fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.trim().as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let d = b.get(r)?;
        if d.is_empty() || !d.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(d).ok()?.parse().ok()
    };
    let sep = |i: usize, c: &[u8]| b.get(i).is_some_and(|x| c.contains(x));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0u32;
    if sep(i, b".") {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            if i - start < 9 {
                nanos = nanos * 10 + u32::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start).min(9)..9 {
            nanos *= 10;
        }
    }
    let offset: i64 = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&c @ (b'+' | b'-')) if i + 6 == b.len() && sep(i + 3, b":") => {
            let m = i64::from(num(i + 1..i + 3)?) * 60 + i64::from(num(i + 4..i + 6)?);
            if c == b'+' { m * 60 } else { -m * 60 }
        }
        _ => return None,
    };
    let days = days_from_civil(i64::from(y), mo, d);
    let secs = days * 86_400 + i64::from(h * 3_600 + mi * 60 + sec) - offset;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn rfc3339_timestamps() {
        // 2025-08-21T12:40:59Z
        assert_eq!(
            parse_rfc3339("2025-08-21T12:40:59Z"),
            Some(at(1_755_780_059))
        );
        assert_eq!(
            parse_rfc3339("2025-08-21T14:40:59.25+02:00"),
            Some(at(1_755_780_059) + Duration::from_millis(250))
        );
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(at(0)));
        assert_eq!(
            parse_rfc3339("2024-02-29T00:00:00Z"),
            Some(at(1_709_164_800))
        );
        for bad in [
            "",
            "2025-08-21",
            "2025-13-01T00:00:00Z",
            "2025-08-21T12:40:59",
            "x025-08-21T12:40:59Z",
            "2025-08-21T12:40:59.Z",
            "1969-12-31T23:59:59Z",
            "2025-08-21T12:40:59+0200",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn next_month_starts_at_midnight_utc_on_the_first() {
        // 2025-08-21T12:40:59Z -> 2025-09-01T00:00:00Z
        assert_eq!(
            until_next_month(at(1_755_780_059)),
            Some(Duration::from_secs(1_756_684_800 - 1_755_780_059))
        );
        // December rolls over the year: 2024-12-31T23:59:59Z -> 2025-01-01.
        assert_eq!(
            until_next_month(at(1_735_689_599)),
            Some(Duration::from_secs(1))
        );
        for days in [0i64, 59, 365, 10_957, 20_000] {
            let (y, m) = year_month(days);
            assert!(days_from_civil(y, m, 1) <= days && days < days_from_civil(y, m, 1) + 31);
        }
    }
}
