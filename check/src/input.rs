//! Manifests as users have them: YAML or JSON files, folders of them, `-` for standard input
//! (`helm template`, `kustomize build`), several documents per file, `List` objects.
//!
//! Every object is kept with where it came from (file and line of its document). Anything
//! that is not a Kubernetes object is an [`InputError`] naming the file and the line.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// The name standard input is reported under.
pub const STDIN_NAME: &str = "<stdin>";

/// Bad input: the file, the line when known, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// The file (or [`STDIN_NAME`]).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl InputError {
    /// An error about `file` as a whole (no line).
    pub fn whole_file(file: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            file: file.into(),
            line: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for InputError {}

/// One Kubernetes object read from the input.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The file it was read from (or [`STDIN_NAME`]).
    pub file: String,
    /// 1-based line where its document starts.
    pub line: usize,
    /// The object.
    pub object: Value,
}

impl Manifest {
    /// `file:line`.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// The files a path names: itself, or for a folder every `.yaml`, `.yml` and `.json` file
/// under it (recursively, sorted; hidden entries skipped).
pub fn files_of(path: &Path) -> Result<Vec<PathBuf>, InputError> {
    let error = |message: String| InputError::whole_file(path.display().to_string(), message);
    let meta = std::fs::metadata(path).map_err(|e| error(format!("cannot read: {e}")))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| error(format!("cannot list the folder: {e}")))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        })
        .collect();
    entries.sort();
    let mut files = Vec::new();
    for entry in entries {
        if entry.is_dir() {
            files.extend(files_of(&entry)?);
        } else if entry
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
        {
            files.push(entry);
        }
    }
    Ok(files)
}

/// Reads every object of `paths` (`-` is `stdin`). Every bad file is reported, not only
/// the first.
pub fn read_manifests(
    paths: &[String],
    stdin: &mut dyn Read,
) -> Result<Vec<Manifest>, Vec<InputError>> {
    let mut manifests = Vec::new();
    let mut errors = Vec::new();
    let mut stdin_read = false;
    for path in paths {
        if path == "-" {
            if stdin_read {
                continue;
            }
            stdin_read = true;
            let mut text = String::new();
            match stdin.read_to_string(&mut text) {
                Ok(_) => match parse_objects(STDIN_NAME, &text) {
                    Ok(found) => manifests.extend(found),
                    Err(e) => errors.push(e),
                },
                Err(e) => errors.push(InputError::whole_file(
                    STDIN_NAME,
                    format!("cannot read standard input: {e}"),
                )),
            }
            continue;
        }
        let files = match files_of(Path::new(path)) {
            Ok(files) => files,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        for file in files {
            let name = file.display().to_string();
            let text = match std::fs::read_to_string(&file) {
                Ok(text) => text,
                Err(e) => {
                    errors.push(InputError::whole_file(name, format!("cannot read: {e}")));
                    continue;
                }
            };
            match parse_objects(&name, &text) {
                Ok(found) => manifests.extend(found),
                Err(e) => errors.push(e),
            }
        }
    }
    if errors.is_empty() {
        Ok(manifests)
    } else {
        Err(errors)
    }
}

/// The documents of `text` with the line each starts on; empty documents are left out.
/// JSON (text starting with `{` or `[`) may hold several values one after another.
pub fn parse_documents(file: &str, text: &str) -> Result<Vec<(usize, Value)>, InputError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let error = |line: Option<usize>, message: String| InputError {
        file: file.to_string(),
        line,
        message,
    };
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let mut out = Vec::new();
        let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
        loop {
            let start = stream.byte_offset();
            match stream.next() {
                None => break,
                Some(Ok(value)) => {
                    let skipped = text[start..].len() - text[start..].trim_start().len();
                    out.push((line_of(text, start + skipped), value));
                }
                Some(Err(e)) => {
                    return Err(error(Some(e.line()), format!("invalid JSON: {e}")));
                }
            }
        }
        return Ok(out);
    }
    let starts = document_lines(text);
    let mut out = Vec::new();
    for (i, document) in yaml_serde::Deserializer::from_str(text).enumerate() {
        let line = starts.get(i).copied().unwrap_or(1);
        match Value::deserialize(document) {
            Ok(Value::Null) => {}
            Ok(value) => out.push((line, value)),
            Err(e) => {
                let at = e.location().map(|l| l.line());
                let message = yaml_message(&e.to_string());
                return Err(error(at.or(Some(line)), format!("invalid YAML: {message}")));
            }
        }
    }
    Ok(out)
}

/// serde_yaml's message without its positions (" at line N column M"): the line is given
/// before the message.
fn yaml_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(" at line ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + " at line ".len()..];
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let after = &after[digits..];
        rest = match after.strip_prefix(" column ") {
            Some(col) => col.trim_start_matches(|c: char| c.is_ascii_digit()),
            None => after,
        };
    }
    out.push_str(rest);
    out
}

/// The 1-based line of byte `offset`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The line each YAML document starts on, in the order the parser yields them: a `---`
/// line starts a document (at its first content line, or the marker's own line when the
/// content is on it or the document is empty); text before the first marker is a document
/// only when it has content.
fn document_lines(text: &str) -> Vec<usize> {
    let mut starts: Vec<usize> = Vec::new();
    // The current document: its marker line, and whether its start was found.
    let mut current: Option<(usize, bool)> = None;
    for (i, line) in text.lines().enumerate() {
        let is_marker =
            line.starts_with("---") && (line.len() == 3 || line[3..].starts_with([' ', '\t']));
        if is_marker {
            if let Some((marker, false)) = current {
                starts.push(marker);
            }
            let rest = line[3..].trim();
            let inline = !rest.is_empty() && !rest.starts_with('#');
            if inline {
                starts.push(i + 1);
            }
            current = Some((i + 1, inline));
            continue;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('%') {
            continue;
        }
        match current {
            Some((_, true)) => {}
            Some((marker, false)) => {
                starts.push(i + 1);
                current = Some((marker, true));
            }
            None => {
                starts.push(i + 1);
                current = Some((i + 1, true));
            }
        }
    }
    if let Some((marker, false)) = current {
        starts.push(marker);
    }
    starts
}

/// The Kubernetes objects of a file: its documents, with `List` objects (`kind: List` or
/// `<Kind>List` with `items`, what `kubectl get -o yaml` writes) opened into their items.
/// A document that is not an object with `apiVersion` and `kind` is an error.
pub fn parse_objects(file: &str, text: &str) -> Result<Vec<Manifest>, InputError> {
    let mut out = Vec::new();
    for (line, document) in parse_documents(file, text)? {
        let error = |message: String| InputError {
            file: file.to_string(),
            line: Some(line),
            message,
        };
        let listed = is_list(&document);
        let items = if listed {
            document["items"].as_array().cloned().unwrap_or_default()
        } else {
            vec![document]
        };
        for (i, object) in items.into_iter().enumerate() {
            let item = if listed {
                format!("items[{i}]: ")
            } else {
                String::new()
            };
            if !object.is_object() {
                return Err(error(format!(
                    "{item}a Kubernetes object (a mapping with apiVersion and kind) was expected, found {}",
                    kind_of_value(&object)
                )));
            }
            for field in ["apiVersion", "kind"] {
                if object[field].as_str().is_none_or(str::is_empty) {
                    return Err(error(format!("{item}the object has no {field}")));
                }
            }
            out.push(Manifest {
                file: file.to_string(),
                line,
                object,
            });
        }
    }
    Ok(out)
}

/// `kind: List` or `<Kind>List` with an `items` array.
pub fn is_list(document: &Value) -> bool {
    document["kind"]
        .as_str()
        .is_some_and(|k| k.ends_with("List"))
        && document["items"].is_array()
}

fn kind_of_value(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_and_their_lines() {
        let text = "# header\n---\n# Source: a\napiVersion: v1\nkind: A\n---\n---\n# empty\n---\napiVersion: v1\nkind: B\n";
        let docs = parse_documents("f", text).unwrap();
        let lines: Vec<usize> = docs.iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, [4, 10]);
        assert_eq!(docs[1].1["kind"], "B");
        let bare = parse_documents("f", "apiVersion: v1\nkind: A\n---\nkind: B\n").unwrap();
        assert_eq!(bare.iter().map(|(l, _)| *l).collect::<Vec<_>>(), [1, 4]);
        let json = parse_documents("f", "{\"kind\": \"A\"}\n\n{\"kind\": \"B\"}").unwrap();
        assert_eq!(json.iter().map(|(l, _)| *l).collect::<Vec<_>>(), [1, 3]);
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse_documents("f.yaml", "a: 1\n---\nb:\n  c: 1\n d: 2\n").unwrap_err();
        assert_eq!(e.line, Some(5), "{e}");
        assert!(e.to_string().starts_with("f.yaml:5: invalid YAML: "), "{e}");
        assert!(!e.message.contains("column"), "{e}");
        let e = parse_documents("f.json", "{\"a\": 1,\n}").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
    }

    #[test]
    fn lists_are_opened() {
        let list = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: a}}\n- {apiVersion: v1, kind: Node, metadata: {name: b}}\n";
        let objects = parse_objects("s", list).unwrap();
        assert_eq!(objects.len(), 2);
        let bad = "apiVersion: v1\nkind: PodList\nitems:\n- {kind: Pod}\n";
        assert_eq!(
            parse_objects("s", bad).unwrap_err().to_string(),
            "s:1: items[0]: the object has no apiVersion"
        );
    }
}
