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
//! Saturday 06:59). IANA zones come from the tz database embedded in the module (jiff's
//! bundled copy: the guest has no file system).

use crate::clock::UnixSeconds;
use jiff::civil::Weekday;
use jiff::tz::{Offset, TimeZone};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

#[derive(Debug, Clone)]
struct CheckedWindow {
    days: Vec<Weekday>,
    /// Minutes after midnight.
    from: u16,
    to: u16,
}

/// Checks every schedule; the error names the field (`schedules.off-peak.windows[0].from`).
pub fn check_all(schedules: &Schedules, field: &str) -> Result<BTreeMap<String, Checked>, String> {
    schedules
        .iter()
        .map(|(name, s)| {
            let field = format!("{field}.{name}");
            if name.trim().is_empty() {
                return Err(format!("{field}: a schedule needs a name"));
            }
            s.check(&field).map(|c| (name.clone(), c))
        })
        .collect()
}

impl Schedule {
    pub fn check(&self, field: &str) -> Result<Checked, String> {
        let zone = zone(&self.time_zone).map_err(|e| format!("{field}.timeZone: {e}"))?;
        if self.windows.is_empty() {
            return Err(format!("{field}.windows: give at least one window"));
        }
        let mut windows = Vec::new();
        for (i, w) in self.windows.iter().enumerate() {
            let field = format!("{field}.windows[{i}]");
            if w.days.is_empty() {
                return Err(format!(
                    "{field}.days: give at least one day (Mon, Tue, Wed, Thu, Fri, Sat, Sun)"
                ));
            }
            let mut days = Vec::new();
            for (j, d) in w.days.iter().enumerate() {
                days.push(weekday(d).ok_or_else(|| {
                    format!(
                        "{field}.days[{j}]: '{d}' is not a day; use Mon, Tue, Wed, Thu, Fri, Sat or Sun"
                    )
                })?);
            }
            let from = minutes(&w.from, false).ok_or_else(|| {
                format!(
                    "{field}.from: '{}' is not a time HH:MM from 00:00 to 23:59",
                    w.from
                )
            })?;
            let to = minutes(&w.to, true).ok_or_else(|| {
                format!(
                    "{field}.to: '{}' is not a time HH:MM from 00:00 to 24:00",
                    w.to
                )
            })?;
            if from == to {
                return Err(format!(
                    "{field}: from and to are both {}; a window needs a length (00:00 to 24:00 for a whole day)",
                    w.from
                ));
            }
            windows.push(CheckedWindow { days, from, to });
        }
        Ok(Checked { zone, windows })
    }
}

impl Checked {
    /// True when `now` is inside one of the windows.
    pub fn contains(&self, now: UnixSeconds) -> bool {
        let Ok(ts) = jiff::Timestamp::from_second(now) else {
            return false;
        };
        let local = self.zone.to_datetime(ts);
        let day = local.weekday();
        let minute = u16::from(local.hour() as u8) * 60 + u16::from(local.minute() as u8);
        self.windows.iter().any(|w| {
            if w.from < w.to {
                w.days.contains(&day) && (w.from..w.to).contains(&minute)
            } else {
                (w.days.contains(&day) && minute >= w.from)
                    || (w.days.contains(&day.previous()) && minute < w.to)
            }
        })
    }
}

/// `UTC`, `Z`, `+05:30`, `-08:00`, or an IANA name from the embedded database.
fn zone(text: &str) -> Result<TimeZone, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err(
            "give a time zone: an IANA name like Europe/Berlin, UTC, or an offset like +05:30"
                .into(),
        );
    }
    if t == "UTC" || t == "Z" {
        return Ok(TimeZone::UTC);
    }
    if let Some(sign) = t.chars().next().filter(|c| *c == '+' || *c == '-') {
        let (h, m) = t[1..]
            .split_once(':')
            .ok_or_else(|| format!("'{t}' is not an offset like +05:30"))?;
        let two_digits = |x: &str| x.len() == 2 && x.bytes().all(|b| b.is_ascii_digit());
        let (h, m): (i32, i32) = match (h.parse(), m.parse()) {
            (Ok(h), Ok(m))
                if two_digits(&t[1..3]) && two_digits(m_text(t)) && h <= 18 && m < 60 =>
            {
                (h, m)
            }
            _ => {
                return Err(format!(
                    "'{t}' is not an offset like +05:30 (hours 00-18, minutes 00-59)"
                ));
            }
        };
        let seconds = (h * 3600 + m * 60) * if sign == '-' { -1 } else { 1 };
        return Offset::from_seconds(seconds)
            .map(TimeZone::fixed)
            .map_err(|e| format!("'{t}': {e}"));
    }
    TimeZone::get(t).map_err(|_| {
        format!("'{t}' is not a time zone the policy knows; use an IANA name like Europe/Berlin or America/New_York, UTC, or an offset like +05:30")
    })
}

/// The minutes of `+HH:MM`.
fn m_text(t: &str) -> &str {
    t.split_once(':').map(|(_, m)| m).unwrap_or("")
}

fn weekday(text: &str) -> Option<Weekday> {
    Some(match text.trim().to_ascii_lowercase().as_str() {
        "mon" | "monday" => Weekday::Monday,
        "tue" | "tuesday" => Weekday::Tuesday,
        "wed" | "wednesday" => Weekday::Wednesday,
        "thu" | "thursday" => Weekday::Thursday,
        "fri" | "friday" => Weekday::Friday,
        "sat" | "saturday" => Weekday::Saturday,
        "sun" | "sunday" => Weekday::Sunday,
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
