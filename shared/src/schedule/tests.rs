use super::*;
use jiff::civil::date;
use rstest::rstest;

fn at(zone: &str, y: i16, mo: i8, d: i8, h: i8, mi: i8) -> UnixSeconds {
    date(y, mo, d)
        .at(h, mi, 0, 0)
        .in_tz(zone)
        .unwrap()
        .timestamp()
        .as_second()
}

fn utc(y: i16, mo: i8, d: i8, h: i8, mi: i8) -> UnixSeconds {
    at("UTC", y, mo, d, h, mi)
}

/// A schedule of one window, unchecked.
fn one_window(zone: &str, days: &[&str], from: &str, to: &str) -> Schedule {
    Schedule {
        time_zone: zone.into(),
        windows: vec![Window {
            days: days.iter().map(|d| d.to_string()).collect(),
            from: from.into(),
            to: to.into(),
        }],
    }
}

fn schedule(zone: &str, days: &[&str], from: &str, to: &str) -> Checked {
    one_window(zone, days, from, to)
        .check("schedules.s")
        .unwrap()
}

// 2026-11-30 is a Monday.
#[test]
fn start_is_inclusive_and_end_exclusive() {
    let s = schedule("UTC", &["Mon"], "09:00", "18:00");
    assert!(!s.contains(utc(2026, 11, 30, 8, 59)));
    assert!(s.contains(utc(2026, 11, 30, 9, 0)));
    assert!(s.contains(utc(2026, 11, 30, 17, 59)));
    assert!(!s.contains(utc(2026, 11, 30, 18, 0)));
    assert!(!s.contains(utc(2026, 12, 1, 10, 0)), "Tuesday");
}

#[test]
fn a_window_over_midnight_belongs_to_the_day_it_starts() {
    // 2026-12-04 is a Friday.
    let s = schedule("UTC", &["Fri"], "20:00", "07:00");
    assert!(!s.contains(utc(2026, 12, 4, 19, 59)));
    assert!(s.contains(utc(2026, 12, 4, 20, 0)));
    assert!(s.contains(utc(2026, 12, 5, 6, 59)), "Saturday morning");
    assert!(!s.contains(utc(2026, 12, 5, 7, 0)));
    assert!(
        !s.contains(utc(2026, 12, 5, 20, 0)),
        "Saturday evening is not Friday's"
    );
    assert!(
        !s.contains(utc(2026, 12, 4, 6, 0)),
        "Thursday's night is not in the window"
    );
}

#[test]
fn whole_days_and_several_windows() {
    let s = schedule("UTC", &["Sat", "sunday"], "00:00", "24:00");
    assert!(s.contains(utc(2026, 12, 5, 0, 0)));
    assert!(s.contains(utc(2026, 12, 6, 23, 59)));
    assert!(!s.contains(utc(2026, 12, 7, 0, 0)), "Monday");
}

#[test]
fn days_are_days_of_the_zone() {
    // Sunday 15:30 UTC is Monday 00:30 in Tokyo.
    let s = schedule("Asia/Tokyo", &["Mon"], "00:00", "01:00");
    assert!(s.contains(utc(2026, 11, 29, 15, 30)));
    assert!(
        !s.contains(utc(2026, 11, 30, 0, 30)),
        "Monday 09:30 in Tokyo"
    );
    let fixed = schedule("+09:00", &["Mon"], "00:00", "01:00");
    assert!(fixed.contains(utc(2026, 11, 29, 15, 30)));
    let west = schedule("-05:30", &["Sun"], "23:00", "24:00");
    assert!(
        west.contains(utc(2026, 11, 30, 4, 45)),
        "Sunday 23:15 at -05:30"
    );
}

#[test]
fn daylight_saving_days_follow_the_wall_clock() {
    // Berlin, 2026-03-29 (Sunday): 02:00 CET jumps to 03:00 CEST.
    let s = schedule("Europe/Berlin", &["Sun"], "01:00", "04:00");
    assert!(s.contains(utc(2026, 3, 29, 0, 30)), "01:30 CET");
    assert!(s.contains(utc(2026, 3, 29, 1, 30)), "03:30 CEST");
    assert!(!s.contains(utc(2026, 3, 29, 2, 0)), "04:00 CEST");
    let skipped = schedule("Europe/Berlin", &["Sun"], "02:00", "03:00");
    assert!(
        !(0..24 * 60).any(|m| skipped.contains(utc(2026, 3, 29, 0, 0) + m * 60)),
        "02:00-03:00 does not exist on that day"
    );
    // 2026-10-25 (Sunday): 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    assert!(skipped.contains(utc(2026, 10, 25, 0, 30)), "02:30 CEST");
    assert!(skipped.contains(utc(2026, 10, 25, 1, 30)), "02:30 CET");
    assert!(!skipped.contains(utc(2026, 10, 25, 2, 0)), "03:00 CET");
    // A summer window is an hour earlier in UTC than a winter one.
    let nine = schedule("Europe/Berlin", &["Mon"], "09:00", "10:00");
    assert!(nine.contains(at("UTC", 2026, 7, 6, 7, 0)));
    assert!(nine.contains(at("UTC", 2026, 12, 7, 8, 0)));
}

#[rstest]
#[case::unknown_zone("Mars/Olympus", &["Mon"], "09:00", "10:00", "schedules.peak.timeZone: 'Mars/Olympus' is not a time zone")]
#[case::no_zone("", &["Mon"], "09:00", "10:00", "schedules.peak.timeZone: give a time zone")]
#[case::offset_past_24_hours("+25:00", &["Mon"], "09:00", "10:00", "schedules.peak.timeZone: '+25:00' is not an offset")]
#[case::offset_one_digit_hour("+5:30", &["Mon"], "09:00", "10:00", "schedules.peak.timeZone: '+5:30' is not an offset")]
#[case::from_hour_25("UTC", &["Mon"], "25:00", "10:00", "schedules.peak.windows[0].from: '25:00' is not a time")]
#[case::from_24_00("UTC", &["Mon"], "24:00", "10:00", "schedules.peak.windows[0].from: '24:00' is not a time")]
#[case::to_one_digit_hour("UTC", &["Mon"], "09:00", "9:30", "schedules.peak.windows[0].to: '9:30' is not a time")]
#[case::no_day("UTC", &[], "09:00", "10:00", "schedules.peak.windows[0].days: give at least one day")]
#[case::unknown_day("UTC", &["Monday", "Funday"], "09:00", "10:00", "schedules.peak.windows[0].days[1]: 'Funday' is not a day")]
#[case::empty_window("UTC", &["Mon"], "09:00", "09:00", "schedules.peak.windows[0]: from and to are both 09:00")]
fn every_mistake_names_its_field(
    #[case] zone: &str,
    #[case] days: &[&str],
    #[case] from: &str,
    #[case] to: &str,
    #[case] starts: &str,
) {
    let err = one_window(zone, days, from, to)
        .check("schedules.peak")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with(starts), "{err}");
}

#[test]
fn a_schedule_without_windows_names_its_field() {
    let empty = Schedule {
        time_zone: "UTC".into(),
        windows: vec![],
    };
    assert_eq!(
        empty.check("schedules.x").unwrap_err().to_string(),
        "schedules.x.windows: give at least one window"
    );
}

#[test]
fn every_named_zone_agrees_with_the_tz_database() {
    // Every 20 minutes of two years from the table's date, in every zone the table names:
    // the local weekday, hour and minute agree with jiff's tz database.
    let start = utc(2026, 12, 1, 0, 0);
    let end = utc(2028, 12, 1, 0, 0);
    for (name, _) in ZONES {
        let ours = zone(name).unwrap();
        let theirs = jiff::tz::TimeZone::get(name).unwrap();
        let mut t = start;
        while t < end {
            let o = tz::DateTime::from_timespec(t, 0, ours.as_ref()).unwrap();
            let j = theirs.to_datetime(jiff::Timestamp::from_second(t).unwrap());
            assert_eq!(
                (o.week_day(), o.hour(), o.minute()),
                (
                    j.weekday().to_sunday_zero_offset() as u8,
                    j.hour() as u8,
                    j.minute() as u8
                ),
                "{name} at {}",
                crate::clock::rfc3339(t)
            );
            t += 1200;
        }
    }
}

#[test]
fn posix_rules_and_unknown_names() {
    let s = schedule("CET-1CEST,M3.5.0,M10.5.0/3", &["Mon"], "09:00", "10:00");
    assert!(s.contains(utc(2026, 7, 6, 7, 0)));
    assert!(zone("Mars/Olympus").is_err());
    assert!(zone("Europe/Nowhere").is_err());
}
