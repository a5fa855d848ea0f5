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
    jiff::Timestamp::from_second(t)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_after_this_code_was_written() {
        assert!(SystemClock.now() > 1_790_000_000);
        assert_eq!(FixedClock(5).now(), 5);
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    }
}
