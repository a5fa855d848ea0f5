//! Timing loops and their summaries (median, p99, max over individually timed calls).

use std::time::{Duration, Instant};

use anyhow::Result;

/// Median, p99 (nearest rank), max and min of a set of timed calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Number of timed calls.
    pub n: usize,
    pub min: Duration,
    pub median: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Summary {
    /// Summarizes `samples`; `None` when there are none.
    pub fn from_samples(mut samples: Vec<Duration>) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let n = samples.len();
        let rank = |q: f64| samples[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        Some(Summary {
            n,
            min: samples[0],
            median: rank(0.5),
            p99: rank(0.99),
            max: samples[n - 1],
        })
    }
}

/// How many calls to make: `warmup` untimed, then timed calls until `budget` is spent,
/// at least `min` and at most `max` of them.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub warmup: usize,
    pub min: usize,
    pub max: usize,
    pub budget: Duration,
}

impl Plan {
    /// Thousands of calls of a sub-millisecond operation.
    pub const fn thousands(calls: usize) -> Plan {
        Plan {
            warmup: 200,
            min: calls,
            max: calls,
            budget: Duration::from_secs(60),
        }
    }

    /// Scales the number of calls by `factor` (at least 3 timed calls; `--quick`).
    pub fn scaled(self, factor: f64) -> Plan {
        let scale = |n: usize| ((n as f64 * factor).round() as usize).max(3);
        Plan {
            warmup: ((self.warmup as f64 * factor).round() as usize).max(1),
            min: scale(self.min),
            max: scale(self.max),
            budget: self.budget.mul_f64(factor.min(1.0)),
        }
    }
}

/// Runs `timed` as `plan` says, timing each call alone; `setup` prepares each call's
/// input outside the timed section (e.g. a fresh replay session).
pub fn measure<T>(
    plan: &Plan,
    setup: impl FnMut() -> T,
    timed: impl FnMut(T) -> Result<()>,
) -> Result<Summary> {
    Summary::from_samples(measure_samples(plan, setup, timed)?)
        .ok_or_else(|| anyhow::anyhow!("no timed calls (plan {plan:?})"))
}

/// [`measure`], returning every timed call (to pool samples taken in several rounds).
pub fn measure_samples<T>(
    plan: &Plan,
    mut setup: impl FnMut() -> T,
    mut timed: impl FnMut(T) -> Result<()>,
) -> Result<Vec<Duration>> {
    for _ in 0..plan.warmup {
        timed(setup())?;
    }
    let mut samples = Vec::with_capacity(plan.max.min(100_000));
    let started = Instant::now();
    while samples.len() < plan.max && (samples.len() < plan.min || started.elapsed() < plan.budget)
    {
        let input = setup();
        let t = Instant::now();
        timed(input)?;
        samples.push(t.elapsed());
    }
    Ok(samples)
}

/// A duration for tables: `830 ns`, `23.4 µs`, `1.25 ms`, `2.1 s`.
pub fn fmt_duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e5 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e6 {
        format!("{:.0} µs", ns / 1e3)
    } else if ns < 1e8 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns < 1e9 {
        format!("{:.0} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// Bytes for tables: `812 B`, `57.3 KiB`, `1.42 MiB`.
pub fn fmt_bytes(n: u64) -> String {
    let n = n as f64;
    if n < 1024.0 {
        format!("{n:.0} B")
    } else if n < 1024.0 * 1024.0 {
        format!("{:.1} KiB", n / 1024.0)
    } else {
        format!("{:.2} MiB", n / (1024.0 * 1024.0))
    }
}

/// `a / b` as a ratio for tables (`3.4x`), `-` when undefined.
pub fn fmt_ratio(a: Duration, b: Duration) -> String {
    if b.is_zero() {
        return "-".into();
    }
    format!("{:.1}x", a.as_secs_f64() / b.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn nearest_rank_percentiles() {
        let s = Summary::from_samples((1..=100).rev().map(us).collect()).unwrap();
        assert_eq!(
            (s.n, s.min, s.median, s.p99, s.max),
            (100, us(1), us(50), us(99), us(100))
        );
        let one = Summary::from_samples(vec![us(7)]).unwrap();
        assert_eq!((one.median, one.p99, one.max), (us(7), us(7), us(7)));
        assert_eq!(Summary::from_samples(Vec::new()), None);
    }

    #[test]
    fn measure_times_every_call_after_warm_up() {
        let mut calls = 0;
        let plan = Plan {
            warmup: 2,
            min: 5,
            max: 5,
            budget: Duration::ZERO,
        };
        let s = measure(
            &plan,
            || (),
            |()| {
                calls += 1;
                Ok(())
            },
        )
        .unwrap();
        assert_eq!((calls, s.n), (7, 5));
        let failing = measure(&plan, || (), |()| anyhow::bail!("guest failed"));
        assert!(failing.is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_duration(Duration::from_nanos(830)), "830 ns");
        assert_eq!(fmt_duration(Duration::from_nanos(23_400)), "23.4 µs");
        assert_eq!(fmt_duration(Duration::from_micros(1_250)), "1.25 ms");
        assert_eq!(fmt_bytes(812), "812 B");
        assert_eq!(fmt_bytes(1024 * 1024 * 3 / 2), "1.50 MiB");
        assert_eq!(fmt_ratio(us(34), us(10)), "3.4x");
        assert_eq!(Plan::thousands(1000).scaled(0.001).min, 3);
    }
}
