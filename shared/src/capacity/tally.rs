//! GPUs of one resource counted against a limit: what is counted now, what the request
//! adds, and the most allowed. A namespace quota ([`super::quotas`]), a team budget
//! ([`super::teams`]), a burst brake ([`super::brake`]) and a pool's threshold
//! ([`super::decision`], whose reserves judge it again: [`super::reserve`]) each judge one.

use std::fmt;

/// `used + incoming <= limit`, for one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// GPUs counted now: in use (a quota's `status.used`, a team's or a pool's pods), or
    /// admitted within a brake's window.
    pub used: u64,
    /// GPUs the request adds.
    pub incoming: u64,
    /// The most allowed: a quota's `spec.hard`, a budget, a brake's `gpus`, a pool's
    /// threshold times what it is judged against.
    pub limit: u64,
}

impl Tally {
    /// GPUs counted once the workload is admitted.
    pub fn after(&self) -> u64 {
        self.used.saturating_add(self.incoming)
    }

    /// Exactly at the limit fits; one more does not.
    pub fn fits(&self) -> bool {
        self.after() <= self.limit
    }

    /// How many more GPUs fit now.
    pub fn room(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }

    /// `fits` or `over`, the last word of an audit line.
    pub fn verdict(&self) -> &'static str {
        verdict(self.fits())
    }
}

/// `24 + incoming 8 = 32 of 32`: the sum an audit line shows after the word for `used`
/// (`used`, `admitted`).
impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} + incoming {} = {} of {}",
            self.used,
            self.incoming,
            self.after(),
            self.limit
        )
    }
}

/// The audit word for a check that `fits` or does not: `fits` or `over`.
pub fn verdict(fits: bool) -> &'static str {
    if fits { "fits" } else { "over" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_at_the_limit_fits() {
        let at = Tally {
            used: 24,
            incoming: 8,
            limit: 32,
        };
        assert_eq!((at.after(), at.fits(), at.room()), (32, true, 8));
        assert_eq!(at.to_string(), "24 + incoming 8 = 32 of 32");
        let over = Tally { incoming: 9, ..at };
        assert_eq!((over.fits(), over.verdict()), (false, "over"));
        let full = Tally {
            used: 40,
            incoming: u64::MAX,
            limit: 32,
        };
        assert_eq!((full.after(), full.room()), (u64::MAX, 0));
    }
}
