//! What the numbers were taken on: cores, CPU, memory, load, date, versions.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// A description of the machine and of what else was running.
#[derive(Debug, Clone)]
pub struct Machine {
    pub cores: usize,
    pub cpu: String,
    pub memory_gib: f64,
    pub rustc: String,
    pub wasmtime: String,
}

fn first_line_with<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim())
}

impl Machine {
    pub fn probe(root: &Path) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_kib: f64 = first_line_with(&meminfo, "MemTotal")
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        let rustc = Command::new("rustc")
            .arg("-V")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        Machine {
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu: first_line_with(&cpuinfo, "model name")
                .unwrap_or("unknown")
                .to_string(),
            memory_gib: memory_kib / (1024.0 * 1024.0),
            rustc,
            wasmtime: locked_version(root, "wasmtime").unwrap_or_else(|| "unknown".into()),
        }
    }
}

/// The version of `package` in the workspace's Cargo.lock.
pub fn locked_version(root: &Path, package: &str) -> Option<String> {
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).ok()?;
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == format!("name = \"{package}\"") {
            return lines
                .next()
                .and_then(|v| v.strip_prefix("version = \""))
                .map(|v| v.trim_end_matches('"').to_string());
        }
    }
    None
}

/// The 1-, 5- and 15-minute load averages.
pub fn load_average() -> Option<(f64, f64, f64)> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut parts = text.split_whitespace().map(|p| p.parse::<f64>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

/// Other processes compiling right now (rustc, cargo, wasm-opt), this one excluded.
pub fn other_builds() -> usize {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
                .is_some_and(|pid| pid != me)
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
        .filter(|comm| matches!(comm.trim(), "rustc" | "wasm-opt"))
        .count()
}

/// Now, as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_utc(secs)
}

/// Unix seconds as `YYYY-MM-DD HH:MM UTC`, from the rules' [`gpu_rules::clock::rfc3339`].
pub fn format_utc(secs: u64) -> String {
    let text = gpu_rules::clock::rfc3339(i64::try_from(secs).unwrap_or(i64::MAX));
    match (text.get(..10), text.get(11..16)) {
        (Some(date), Some(time)) => format!("{date} {time} UTC"),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(format_utc(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(format_utc(1_795_960_800), "2026-11-29 14:00 UTC");
    }

    #[test]
    fn cpuinfo_fields() {
        let text = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R)\n";
        assert_eq!(
            first_line_with(text, "model name"),
            Some("Intel(R) Xeon(R)")
        );
        assert_eq!(first_line_with(text, "flags"), None);
    }
}
