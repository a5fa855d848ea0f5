//! Named time windows ("peak", "off-peak") that routing and the capacity gate consult.
//!
//! ```yaml
//! schedules:
//!   off-peak:
//!     timeZone: Europe/Berlin        # an IANA name, UTC, or a fixed offset like +05:30
//!     windows:
//!       - days: [Mon, Tue, Wed, Thu, Fri]
//!         from: "20:00"              # inclusive
//!         to: "07:00"                # exclusive; before `from`: the window runs over midnight
//!       - days: [Sat, Sun]
//!         from: "00:00"
//!         to: "24:00"
//! ```
//!
//! A window is local wall-clock time in its zone, so it follows daylight saving: on the
//! day clocks go forward a window that starts in the skipped hour starts when the clock
//! shows a later time; on the day they go back the repeated hour is in the window twice.
//! A window over midnight belongs to the day it starts on (`Fri 20:00-07:00` holds
//! Saturday 06:59).
//!
//! Zones: `UTC`, a fixed offset (`+05:30`), one of the IANA names in [`ZONES`] (each
//! stands for its current rule: correct for today and the future, which is all a
//! schedule asks), or any POSIX TZ rule (`CET-1CEST,M3.5.0,M10.5.0/3`) for the others.
//! The guest has no file system, so no tz database is read; the module carries this table
//! instead of a whole database (540 KB), and the tests check every entry against one.

use crate::clock::UnixSeconds;
use crate::settings::FieldError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tz::TimeZone;

/// IANA names the policies know, with their current POSIX TZ rule (the rule line of the
/// zone's tz database file; checked against jiff's bundled database from 2026-12 on).
pub const ZONES: &[(&str, &str)] = &[
    ("UTC", "UTC0"),
    ("Etc/UTC", "UTC0"),
    ("Europe/London", "GMT0BST,M3.5.0/1,M10.5.0"),
    ("Europe/Dublin", "GMT0IST,M3.5.0/1,M10.5.0"),
    ("Europe/Lisbon", "WET0WEST,M3.5.0/1,M10.5.0"),
    ("Europe/Amsterdam", "CET-1CEST,M3.5.0,M10.5.0/3"),
    ("Europe/Berlin", "CET-1CEST,M3.5.0,M10.5.0/3"),
    ("Europe/Brussels", "CET-1CEST,M3.5.0,M10.5.0/3"),
    ("Europe/Copenhagen", "CET-1CEST,M3.5.0,M10.5.0/3"),
    ("Europe/Madrid", "CET-1CEST,M3.5.0,M10.5.0/3"),
    ("Europe/Oslo", "CET-1CEST,M3.5.0,M10.5.0/3"),
    ("Europe/Paris", "CET-1CEST,M3.5.0,M10.5.0/3"),
    ("Europe/Prague", "CET-1CEST,M3.5.0,M10.5.0/3"),
    ("Europe/Rome", "CET-1CEST,M3.5.0,M10.5.0/3"),
    ("Europe/Stockholm", "CET-1CEST,M3.5.0,M10.5.0/3"),
    ("Europe/Vienna", "CET-1CEST,M3.5.0,M10.5.0/3"),
    ("Europe/Warsaw", "CET-1CEST,M3.5.0,M10.5.0/3"),
    ("Europe/Zurich", "CET-1CEST,M3.5.0,M10.5.0/3"),
    ("Europe/Athens", "EET-2EEST,M3.5.0/3,M10.5.0/4"),
    ("Europe/Bucharest", "EET-2EEST,M3.5.0/3,M10.5.0/4"),
    ("Europe/Helsinki", "EET-2EEST,M3.5.0/3,M10.5.0/4"),
    ("Europe/Kyiv", "EET-2EEST,M3.5.0/3,M10.5.0/4"),
    ("Europe/Istanbul", "<+03>-3"),
    ("Europe/Moscow", "MSK-3"),
    ("America/New_York", "EST5EDT,M3.2.0,M11.1.0"),
    ("America/Toronto", "EST5EDT,M3.2.0,M11.1.0"),
    ("America/Chicago", "CST6CDT,M3.2.0,M11.1.0"),
    ("America/Denver", "MST7MDT,M3.2.0,M11.1.0"),
    ("America/Phoenix", "MST7"),
    ("America/Los_Angeles", "PST8PDT,M3.2.0,M11.1.0"),
    // British Columbia keeps daylight time all year from 2026-11-01.
    ("America/Vancouver", "MST7"),
    ("America/Anchorage", "AKST9AKDT,M3.2.0,M11.1.0"),
    ("America/Mexico_City", "CST6"),
    ("America/Bogota", "<-05>5"),
    ("America/Sao_Paulo", "<-03>3"),
    ("America/Argentina/Buenos_Aires", "<-03>3"),
    ("Pacific/Honolulu", "HST10"),
    ("Asia/Dubai", "<+04>-4"),
    ("Asia/Kolkata", "IST-5:30"),
    ("Asia/Bangkok", "<+07>-7"),
    ("Asia/Jakarta", "WIB-7"),
    ("Asia/Singapore", "<+08>-8"),
    ("Asia/Shanghai", "CST-8"),
    ("Asia/Hong_Kong", "HKT-8"),
    ("Asia/Taipei", "CST-8"),
    ("Asia/Seoul", "KST-9"),
    ("Asia/Tokyo", "JST-9"),
    ("Australia/Perth", "AWST-8"),
    ("Australia/Brisbane", "AEST-10"),
    ("Australia/Sydney", "AEST-10AEDT,M10.1.0,M4.1.0/3"),
    ("Australia/Melbourne", "AEST-10AEDT,M10.1.0,M4.1.0/3"),
    ("Pacific/Auckland", "NZST-12NZDT,M9.5.0,M4.1.0/3"),
    ("Africa/Lagos", "WAT-1"),
    ("Africa/Johannesburg", "SAST-2"),
    ("Africa/Nairobi", "EAT-3"),
];

/// Schedules by name, as settings give them.
pub type Schedules = BTreeMap<String, Schedule>;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Schedule {
    /// `Europe/Berlin`, `UTC`, `+05:30`.
    pub time_zone: String,
    pub windows: Vec<Window>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Window {
    /// `Mon` ... `Sun` (or the full English names), in the schedule's zone.
    pub days: Vec<String>,
    /// `HH:MM`, inclusive.
    pub from: String,
    /// `HH:MM` (`24:00` for the end of the day), exclusive.
    pub to: String,
}

/// A schedule checked and ready to ask.
#[derive(Debug, Clone)]
pub struct Checked {
    zone: TimeZone,
    windows: Vec<CheckedWindow>,
}

/// 0 = Sunday ... 6 = Saturday, as POSIX counts.
type Weekday = u8;

#[derive(Debug, Clone)]
struct CheckedWindow {
    days: Vec<Weekday>,
    /// Minutes after midnight.
    from: u16,
    to: u16,
}

/// Checks every schedule; the error names the field (`schedules.off-peak.windows[0].from`).
pub fn check_all(
    schedules: &Schedules,
    field: &str,
) -> Result<BTreeMap<String, Checked>, FieldError> {
    schedules
        .iter()
        .map(|(name, s)| {
            let field = format!("{field}.{name}");
            if name.trim().is_empty() {
                return Err(FieldError::new(field, "a schedule needs a name"));
            }
            s.check(&field).map(|c| (name.clone(), c))
        })
        .collect()
}

impl Schedule {
    pub fn check(&self, field: &str) -> Result<Checked, FieldError> {
        let zone =
            zone(&self.time_zone).map_err(|e| FieldError::new(format!("{field}.timeZone"), e))?;
        at_least_one(&self.windows, || format!("{field}.windows"), "window")?;
        let mut windows = Vec::new();
        for (i, w) in self.windows.iter().enumerate() {
            let field = format!("{field}.windows[{i}]");
            at_least_one(
                &w.days,
                || format!("{field}.days"),
                "day (Mon, Tue, Wed, Thu, Fri, Sat, Sun)",
            )?;
            let mut days = Vec::new();
            for (j, d) in w.days.iter().enumerate() {
                days.push(weekday(d).ok_or_else(|| {
                    FieldError::new(
                        format!("{field}.days[{j}]"),
                        format!("'{d}' is not a day; use Mon, Tue, Wed, Thu, Fri, Sat or Sun"),
                    )
                })?);
            }
            let time = |name: &str, text: &str, end: bool| {
                minutes(text, end).ok_or_else(|| {
                    let last = if end { "24:00" } else { "23:59" };
                    FieldError::new(
                        format!("{field}.{name}"),
                        format!("'{text}' is not a time HH:MM from 00:00 to {last}"),
                    )
                })
            };
            let from = time("from", &w.from, false)?;
            let to = time("to", &w.to, true)?;
            if from == to {
                return Err(FieldError::new(
                    field,
                    format!(
                        "from and to are both {}; a window needs a length (00:00 to 24:00 for a whole day)",
                        w.from
                    ),
                ));
            }
            windows.push(CheckedWindow { days, from, to });
        }
        Ok(Checked { zone, windows })
    }
}

/// `list` names something, else `give at least one <what>` at `field`.
fn at_least_one<T>(
    list: &[T],
    field: impl FnOnce() -> String,
    what: &str,
) -> Result<(), FieldError> {
    if list.is_empty() {
        return Err(FieldError::new(
            field(),
            format!("give at least one {what}"),
        ));
    }
    Ok(())
}

impl Checked {
    /// True when `now` is inside one of the windows.
    pub fn contains(&self, now: UnixSeconds) -> bool {
        let Ok(local) = tz::DateTime::from_timespec(now, 0, self.zone.as_ref()) else {
            return false;
        };
        let day = local.week_day();
        let minute = u16::from(local.hour()) * 60 + u16::from(local.minute());
        self.windows.iter().any(|w| {
            if w.from < w.to {
                w.days.contains(&day) && (w.from..w.to).contains(&minute)
            } else {
                (w.days.contains(&day) && minute >= w.from)
                    || (w.days.contains(&((day + 6) % 7)) && minute < w.to)
            }
        })
    }
}

/// `UTC`, `Z`, `+05:30`, `-08:00`, an IANA name from [`ZONES`], or a POSIX TZ rule.
fn zone(text: &str) -> Result<TimeZone, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err(
            "give a time zone: an IANA name like Europe/Berlin, UTC, or an offset like +05:30"
                .into(),
        );
    }
    if t == "Z" {
        return Ok(TimeZone::utc());
    }
    if let Some(sign) = t.chars().next().filter(|c| *c == '+' || *c == '-') {
        let bad = || format!("'{t}' is not an offset like +05:30 (hours 00-18, minutes 00-59)");
        let (h, m) = t[1..].split_once(':').ok_or_else(bad)?;
        let two_digits = |x: &str| x.len() == 2 && x.bytes().all(|b| b.is_ascii_digit());
        if !two_digits(h) || !two_digits(m) {
            return Err(bad());
        }
        let (h, m): (i32, i32) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
        if h > 18 || m > 59 {
            return Err(bad());
        }
        let seconds = (h * 3600 + m * 60) * if sign == '-' { -1 } else { 1 };
        return TimeZone::fixed(seconds).map_err(|e| format!("'{t}': {e}"));
    }
    let rule = ZONES
        .iter()
        .find(|(name, _)| *name == t)
        .map(|(_, rule)| *rule)
        .unwrap_or(t);
    posix(rule).ok_or_else(|| {
        format!(
            "'{t}' is not a time zone the policy knows; use UTC, an offset like +05:30, one of the IANA names {} or a POSIX TZ rule like CET-1CEST,M3.5.0,M10.5.0/3",
            ZONES.iter().map(|(n, _)| *n).filter(|n| n.contains('/')).take(6).collect::<Vec<_>>().join(", ") + "..."
        )
    })
}

/// A POSIX TZ rule, never read from a file (the guest has none; natively it must not
/// depend on the machine's tz database either).
fn posix(rule: &str) -> Option<TimeZone> {
    if rule.contains('/') && !rule.contains(',') {
        return None;
    }
    tz::timezone::TimeZoneSettings::new(&[], |_| Err("no tz database is read".into()))
        .parse_posix_tz(rule)
        .ok()
}

fn weekday(text: &str) -> Option<Weekday> {
    Some(match text.trim().to_ascii_lowercase().as_str() {
        "sun" | "sunday" => 0,
        "mon" | "monday" => 1,
        "tue" | "tuesday" => 2,
        "wed" | "wednesday" => 3,
        "thu" | "thursday" => 4,
        "fri" | "friday" => 5,
        "sat" | "saturday" => 6,
        _ => return None,
    })
}

/// `HH:MM` -> minutes after midnight; `24:00` only as an end.
fn minutes(text: &str, end: bool) -> Option<u16> {
    let (h, m) = text.trim().split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
    match (h, m) {
        (24, 0) if end => Some(24 * 60),
        (0..=23, 0..=59) => Some(h * 60 + m),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
