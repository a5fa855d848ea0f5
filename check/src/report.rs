//! The report: a table a person reads, JSON, or JUnit XML for CI.

use std::fmt::Write as _;

use serde_json::json;

use crate::evaluate::{Row, Verdict};

/// Counts over the rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Objects checked.
    pub objects: usize,
    /// Rows admitted.
    pub admitted: usize,
    /// Rows denied.
    pub denied: usize,
    /// Rows skipped.
    pub skipped: usize,
    /// Rows with warnings.
    pub warned: usize,
}

impl Summary {
    /// Counts `rows` of `objects` objects.
    pub fn of(rows: &[Row], objects: usize) -> Self {
        let count = |v| rows.iter().filter(|r| r.verdict == v).count();
        Self {
            objects,
            admitted: count(Verdict::Admitted),
            denied: count(Verdict::Denied),
            skipped: count(Verdict::Skipped),
            warned: rows.iter().filter(|r| !r.warnings.is_empty()).count(),
        }
    }

    /// One line.
    pub fn line(&self) -> String {
        format!(
            "{} objects: {} admitted, {} denied, {} skipped, {} with warnings",
            self.objects, self.admitted, self.denied, self.skipped, self.warned
        )
    }
}

/// The patch column: `op path` items, the first three and how many more.
fn patch_summary(patch: &[String]) -> String {
    let mut text = patch.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    if patch.len() > 3 {
        let _ = write!(text, " (+{} more)", patch.len() - 3);
    }
    text
}

/// The table: FILE, OBJECT, POLICY, VERDICT, MESSAGE, and `| patch: ...` when the policy
/// patched the object; the message is not cut (it is what tells what to change).
pub fn table(rows: &[Row], summary: &Summary) -> String {
    let headers = ["FILE", "OBJECT", "POLICY", "VERDICT", "MESSAGE", ""];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            let mut message = r.message.clone();
            for w in r
                .warnings
                .iter()
                .skip(usize::from(message.starts_with("warning: ")))
            {
                let _ = write!(message, " [warning: {w}]");
            }
            [
                r.file.clone(),
                format!("{} ({})", r.object, r.operation),
                r.policy.clone(),
                r.verdict.word().to_string(),
                if message.is_empty() {
                    "-".into()
                } else {
                    message
                },
                if r.patch.is_empty() {
                    String::new()
                } else {
                    patch_summary(&r.patch)
                },
            ]
        })
        .collect();
    let mut widths = headers.map(str::len);
    for row in &cells {
        for (i, cell) in row.iter().enumerate().take(4) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cols: [&str; 6]| {
        let mut text = String::new();
        for (i, c) in cols.iter().enumerate() {
            if i < 4 {
                let _ = write!(text, "{c:<width$}  ", width = widths[i]);
            } else if i == 4 {
                let _ = write!(text, "{c}");
            } else if !c.is_empty() {
                let _ = write!(text, "  | patch: {c}");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(headers);
    for row in &cells {
        line(row.each_ref().map(String::as_str));
    }
    out.push_str(&summary.line());
    out.push('\n');
    out
}

/// `{"results": [...], "summary": {...}}`.
pub fn json(rows: &[Row], summary: &Summary) -> String {
    let value = json!({
        "results": rows,
        "summary": {
            "objects": summary.objects,
            "admitted": summary.admitted,
            "denied": summary.denied,
            "skipped": summary.skipped,
            "withWarnings": summary.warned,
        },
    });
    serde_json::to_string_pretty(&value).unwrap_or_default() + "\n"
}

fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML: one test suite per file, one test case per object and policy; a denial is a
/// failure (a warning too, with `warnings_as_errors`), a skip is skipped.
pub fn junit(rows: &[Row], summary: &Summary, warnings_as_errors: bool) -> String {
    let mut files: Vec<&str> = Vec::new();
    for r in rows {
        let file = r.file.rsplit_once(':').map_or(r.file.as_str(), |(f, _)| f);
        if !files.contains(&file) {
            files.push(file);
        }
    }
    let failed =
        |r: &Row| r.verdict == Verdict::Denied || (warnings_as_errors && !r.warnings.is_empty());
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"gpu-admission check\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">",
        rows.len(),
        rows.iter().filter(|r| failed(r)).count(),
        summary.skipped
    );
    for file in files {
        let in_file: Vec<&Row> = rows
            .iter()
            .filter(|r| r.file.rsplit_once(':').map_or(r.file.as_str(), |(f, _)| f) == file)
            .collect();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">",
            xml(file),
            in_file.len(),
            in_file.iter().filter(|r| failed(r)).count(),
            in_file
                .iter()
                .filter(|r| r.verdict == Verdict::Skipped)
                .count()
        );
        for r in in_file {
            let _ = write!(
                out,
                "    <testcase classname=\"{}\" name=\"{} ({}): {}\"",
                xml(&r.file),
                xml(&r.object),
                r.operation,
                xml(&r.policy)
            );
            if failed(r) {
                let message = if r.verdict == Verdict::Denied {
                    r.message.clone()
                } else {
                    format!("warnings: {}", r.warnings.join("; "))
                };
                let _ = writeln!(
                    out,
                    ">\n      <failure message=\"{}\" type=\"{}\"/>\n    </testcase>",
                    xml(&message),
                    if r.verdict == Verdict::Denied {
                        "denied"
                    } else {
                        "warning"
                    }
                );
            } else if r.verdict == Verdict::Skipped {
                let _ = writeln!(
                    out,
                    ">\n      <skipped message=\"{}\"/>\n    </testcase>",
                    xml(&r.message)
                );
            } else {
                out.push_str("/>\n");
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}
