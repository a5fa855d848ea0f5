//! Driver and CUDA versions: dotted whole numbers (`535.104.05`, `12.4`), compared part
//! by part, a missing part counting as 0 (`535` = `535.0.0`).

use std::cmp::Ordering;
use std::fmt;

/// A dotted version; at most four parts.
#[derive(Debug, Clone, Eq)]
pub struct Version {
    parts: Vec<u64>,
    text: String,
}

impl Version {
    /// `535.104.05` (leading zeros allowed, as NVIDIA writes revisions); an optional
    /// leading `v`. `None` for anything else.
    pub fn parse(text: &str) -> Option<Version> {
        let t = text.trim();
        let bare = t.strip_prefix('v').unwrap_or(t);
        if bare.is_empty() {
            return None;
        }
        let parts: Option<Vec<u64>> = bare
            .split('.')
            .map(|p| {
                (!p.is_empty() && p.len() <= 9 && p.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| p.parse().ok())
                    .flatten()
            })
            .collect();
        let parts = parts.filter(|p| p.len() <= 4)?;
        Some(Version {
            parts,
            text: bare.to_string(),
        })
    }

    /// A version from the parts of separate node labels (`major`, `minor`, `rev`); `None`
    /// without a valid major.
    pub fn from_parts(parts: &[Option<&str>]) -> Option<Version> {
        let present: Vec<&str> = parts.iter().map_while(|p| *p).collect();
        if present.is_empty() {
            return None;
        }
        Version::parse(&present.join("."))
    }

    fn part(&self, i: usize) -> u64 {
        self.parts.get(i).copied().unwrap_or(0)
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        (0..self.parts.len().max(other.parts.len()))
            .map(|i| self.part(i).cmp(&other.part(i)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::Version;

    fn v(t: &str) -> Version {
        Version::parse(t).unwrap()
    }

    #[test]
    fn versions_compare_part_by_part() {
        assert!(v("535.104.05") > v("535.104"));
        assert!(v("535.104.05") < v("535.129"));
        assert!(v("550") > v("535.999.99"));
        assert_eq!(v("12.4"), v("12.4.0"));
        assert!(v("12.10") > v("12.9"), "numeric, not textual");
        assert_eq!(v("v12.2").to_string(), "12.2");
        assert_eq!(
            Version::from_parts(&[Some("535"), Some("104"), Some("05")]),
            Some(v("535.104.5"))
        );
        assert_eq!(
            Version::from_parts(&[Some("12"), None, Some("1")]),
            Some(v("12"))
        );
        assert_eq!(Version::from_parts(&[None, Some("1")]), None);
    }

    #[test]
    fn nonsense_is_not_a_version() {
        for t in [
            "",
            "v",
            "abc",
            "535.",
            ".1",
            "1..2",
            "1.2.3.4.5",
            "-1",
            "1.x",
            "9999999999",
        ] {
            assert_eq!(Version::parse(t), None, "{t}");
        }
    }
}
