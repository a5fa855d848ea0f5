//! Dates computed by the tests themselves, not by the modules under test: the exceptions'
//! `expires` dated at test time and the times the modules write into annotations.

/// Seconds since 1970-01-01 UTC on this machine's clock.
pub fn unix_now() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(d.as_secs()).unwrap()
}

/// Days since 1970-01-01 today, on this machine's clock.
pub fn today() -> i64 {
    unix_now().div_euclid(86_400)
}

/// Fails with `renew` (what to move forward) unless `ends`, in seconds since the epoch, is
/// more than 30 days from now.
pub fn assert_more_than_30_days_ahead(ends: i64, renew: &str) {
    assert!(unix_now() < ends - 30 * 86_400, "{renew}");
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
}

/// `YYYY-MM-DD` of day `days` since 1970-01-01.
pub fn civil_from_days(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SSZ` (that exact form, nothing else).
pub fn parse_utc(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let digits = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let (y, m, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (h, mi, s) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    Some(days_from_civil(y, m, d) * 86_400 + h * 3600 + mi * 60 + s)
}

/// Every policy's settings file of exceptions, in its test_data/.
pub const EXCEPTIONS_FIXTURE: &str = "settings_exceptions.yml";

/// The first exception of a policy's [`EXCEPTIONS_FIXTURE`], dated at test time so that
/// its cases never go stale.
pub struct DatedException {
    pub name: &'static str,
    pub owner: &'static str,
    today: i64,
}

impl DatedException {
    pub fn new(name: &'static str, owner: &'static str) -> Self {
        DatedException {
            name,
            owner,
            today: today(),
        }
    }

    /// `YYYY-MM-DD`, `days` days from today.
    pub fn date(&self, days: i64) -> String {
        civil_from_days(self.today + days)
    }

    /// The settings with the exception's `expires` `days` days from today.
    pub fn until(&self, policy: super::PolicyUnderTest, days: i64) -> serde_json::Value {
        let mut s = policy.settings(EXCEPTIONS_FIXTURE);
        s["exceptions"][0]["expires"] = self.date(days).into();
        s
    }

    /// The `exception` audit annotation of the exception expiring `days` from today (it ends
    /// at the start of the next day).
    pub fn audit(&self, days: i64) -> String {
        format!(
            "exception={} owner={} expires={}T00:00:00Z",
            self.name,
            self.owner,
            civil_from_days(self.today + days + 1)
        )
    }

    /// Evaluates `request` (host calls served from the test_data file `session`, if any)
    /// under `policy` with the exception expiring 30 days from today, then `soon` days from
    /// today: accepted both times, first with no warning and the exception's audit
    /// annotation, then with its last-week warning. The first answer and that warning.
    pub fn assert_applies(
        &self,
        policy: super::PolicyUnderTest,
        request: &serde_json::Value,
        session: Option<&str>,
        soon: i64,
    ) -> (gpu_e2e::AdmissionResponse, String) {
        let validate = |days: i64| {
            policy
                .module()
                .validate(
                    request,
                    &self.until(policy, days),
                    session.map(|s| policy.session(s)),
                )
                .unwrap()
        };
        let month = validate(30);
        assert!(month.allowed && month.warnings.is_none(), "{month:?}");
        assert_eq!(month.audit("exception"), Some(self.audit(30).as_str()));
        let last_week = validate(soon);
        assert!(last_week.allowed, "{last_week:?}");
        let warning = self.last_week_warning(last_week.warnings, soon);
        (month, warning)
    }

    /// Fails unless `request`, its pod template relabelled `app: <app>` (a workload of the
    /// same namespace that the exception's selector does not match), is denied under
    /// `policy` with the exception expiring 30 days from today (host calls served from the
    /// test_data file `session`, if any).
    pub fn assert_not_applied_to_another_app(
        &self,
        policy: super::PolicyUnderTest,
        request: &serde_json::Value,
        session: Option<&str>,
        app: &str,
    ) {
        let mut other = request.clone();
        other["object"]["spec"]["template"]["metadata"]["labels"]["app"] = app.into();
        let response = policy
            .module()
            .validate(
                &other,
                &self.until(policy, 30),
                session.map(|s| policy.session(s)),
            )
            .unwrap();
        assert!(!response.allowed, "app {app}: {response:?}");
    }

    /// Fails unless `warnings` is one warning that the exception expiring `days` from today
    /// ends soon, when, and what to do; returns it.
    pub fn last_week_warning(&self, warnings: Option<Vec<String>>, days: i64) -> String {
        let warnings = warnings.unwrap_or_default();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let warning = warnings[0].clone();
        assert!(
            warning.starts_with(&format!(
                "exception {} (owner {}) ends {}T00:00:00Z (in ",
                self.name,
                self.owner,
                civil_from_days(self.today + days + 1)
            )) && warning.ends_with("; renew it or fix the workload before then"),
            "{warning}"
        );
        warning
    }
}
