//! "Now", behind one trait so rules that depend on the time are tested with a fixed
//! clock. Kubewarden runs policies under WASI, so [`SystemClock`] reads the host's clock
//! (`clock_time_get`): under kwctl and policy-server that is the machine's real time.

/// Seconds since the Unix epoch, UTC.
pub type UnixSeconds = i64;

pub trait Clock {
    fn now(&self) -> UnixSeconds;
}

/// The host's clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> UnixSeconds {
        match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
        }
    }
}

/// A clock stopped at one instant (tests, benchmarks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedClock(pub UnixSeconds);

impl Clock for FixedClock {
    fn now(&self) -> UnixSeconds {
        self.0
    }
}

/// `2026-12-01T10:00:00Z` for messages.
pub fn rfc3339(t: UnixSeconds) -> String {
    match tz::UtcDateTime::from_timespec(t, 0) {
        Ok(d) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            d.year(),
            d.month(),
            d.month_day(),
            d.hour(),
            d.minute(),
            d.second()
        ),
        Err(_) => format!("{t} s after 1970"),
    }
}

/// `2027-01-31` -> the first second of 2027-02-01 UTC (the whole day is included);
/// `2027-01-31T18:00:00Z` or with an offset (`+01:00`), fractions of a second ignored ->
/// that instant.
pub fn parse_end(text: &str) -> Option<UnixSeconds> {
    let t = text.trim();
    let date = |d: &str| -> Option<(i32, u8, u8)> {
        let b = d.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        Some((
            d[..4].parse().ok()?,
            d[5..7].parse().ok()?,
            d[8..10].parse().ok()?,
        ))
    };
    let utc = |(y, m, d): (i32, u8, u8), h: u8, mi: u8, s: u8| {
        tz::UtcDateTime::new(y, m, d, h, mi, s, 0)
            .ok()
            .map(|x| x.unix_time())
    };
    if t.len() == 10 {
        return utc(date(t)?, 0, 0, 0).map(|s| s + 86_400);
    }
    // YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)
    if t.len() < 20 || !t.is_char_boundary(19) || !matches!(&t[10..11], "T" | "t" | " ") {
        return None;
    }
    let (clock, mut zone) = (&t[11..19], &t[19..]);
    let cb = clock.as_bytes();
    if cb[2] != b':' || cb[5] != b':' {
        return None;
    }
    if let Some(rest) = zone.strip_prefix('.') {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        zone = &rest[digits..];
    }
    let offset = match zone {
        "Z" | "z" => 0,
        _ => {
            let b = zone.as_bytes();
            if b.len() != 6 || b[3] != b':' || !matches!(b[0], b'+' | b'-') {
                return None;
            }
            let (h, m): (i64, i64) = (zone[1..3].parse().ok()?, zone[4..6].parse().ok()?);
            if h > 23 || m > 59 {
                return None;
            }
            let o = h * 3600 + m * 60;
            if b[0] == b'-' { -o } else { o }
        }
    };
    let at = utc(
        date(&t[..10])?,
        clock[..2].parse().ok()?,
        clock[3..5].parse().ok()?,
        clock[6..8].parse().ok()?,
    )?;
    Some(at - offset)
}

/// A duration as settings write it: one or more `<whole number><unit>` with unit `s`, `m`
/// or `h` (`90s`, `10m`, `1h30m`), in seconds; `None` for anything else (and above a year).
pub fn parse_duration(text: &str) -> Option<i64> {
    let mut total: i64 = 0;
    let mut number: Option<i64> = None;
    for c in text.trim().chars() {
        match c {
            '0'..='9' => {
                let digit = i64::from(c as u8 - b'0');
                number = Some(number.unwrap_or(0).checked_mul(10)?.checked_add(digit)?);
            }
            's' | 'm' | 'h' => {
                let unit = match c {
                    's' => 1,
                    'm' => 60,
                    _ => 3600,
                };
                total = total.checked_add(number.take()?.checked_mul(unit)?)?;
            }
            _ => return None,
        }
    }
    (number.is_none() && total <= 366 * 86_400 && !text.trim().is_empty()).then_some(total)
}

/// Seconds as a duration's text: `10m`, `1h30m`, `90s` -> `1m30s`, `0s`.
pub fn duration_text(seconds: i64) -> String {
    let (h, m, s) = (seconds / 3600, seconds % 3600 / 60, seconds % 60);
    let mut out = String::new();
    for (n, unit) in [(h, 'h'), (m, 'm'), (s, 's')] {
        if n != 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    if out.is_empty() { "0s".into() } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_after_this_code_was_written() {
        assert!(SystemClock.now() > 1_790_000_000);
        assert_eq!(FixedClock(5).now(), 5);
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_083_200), "2026-12-01T00:00:00Z");
    }

    #[test]
    fn durations_read_and_print() {
        for (text, seconds) in [
            ("10m", 600),
            ("90s", 90),
            ("1h30m", 5400),
            (" 2m ", 120),
            ("0s", 0),
        ] {
            assert_eq!(parse_duration(text), Some(seconds), "{text}");
        }
        for bad in [
            "",
            "10",
            "m",
            "10 m",
            "1.5m",
            "10d",
            "-1m",
            "9999999999999999999s",
            "367h0m0s9000h",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
        assert_eq!(duration_text(600), "10m");
        assert_eq!(duration_text(5400), "1h30m");
        assert_eq!(duration_text(90), "1m30s");
        assert_eq!(duration_text(0), "0s");
    }

    #[test]
    fn end_dates_and_times_agree_with_jiff() {
        for text in [
            "2027-01-31",
            "2024-02-29",
            "2027-01-31T18:00:00Z",
            "2027-01-31T18:00:00.250Z",
            "2027-01-31T18:00:00+05:30",
            "2027-01-31T18:00:00-08:00",
        ] {
            let ours = parse_end(text).unwrap();
            let theirs = match text.parse::<jiff::civil::Date>() {
                Ok(d) if text.len() == 10 => d
                    .tomorrow()
                    .unwrap()
                    .at(0, 0, 0, 0)
                    .in_tz("UTC")
                    .unwrap()
                    .timestamp()
                    .as_second(),
                _ => text.parse::<jiff::Timestamp>().unwrap().as_second(),
            };
            assert_eq!(ours, theirs, "{text}");
        }
        for bad in [
            "",
            "soon",
            "2027-13-01",
            "2027-02-30",
            "2027-1-31",
            "2027-01-31T25:00:00Z",
            "2027-01-31T18:00:00",
            "2027-01-31T18:00:00+5:30",
            "2027-01-31T18:00Zjunk",
            "2027-01-31T18:00:00.Z",
            "2027-01-31Té0:00:00Z",
        ] {
            assert_eq!(parse_end(bad), None, "{bad}");
        }
    }
}
