//! The model registry ConfigMap's YAML, read into JSON values.
//!
//! `saphyr-parser` (a pure-Rust YAML 1.2 parser, no `unsafe`) turns the text into
//! events; this module builds the values from them and enforces what the registry
//! allows: one document, at most [`MAX_DEPTH`] nested collections, text keys given once,
//! and no anchors, aliases or tags (registry entries are flat; an alias could expand a
//! small ConfigMap into a huge value). A document starting with `{` is read as JSON.
//! Every error is `line N: ...`.

use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use serde_json::{Map, Number, Value};

/// Deepest nesting read (block and flow collections together). Registry entries nest
/// three levels; the events are read one at a time, so `[[[...` stops here rather than
/// building a deep value.
const MAX_DEPTH: usize = 32;

/// Parses `text` into JSON values; errors are `line N: ...`.
pub fn parse(text: &str) -> Result<Value, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"));
    }
    let mut builder = Builder::default();
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| parse_error(text, e.marker().line(), e.info()))?;
        if let Some(value) = builder.event(event, span)? {
            return Ok(value);
        }
    }
    Ok(Value::Null)
}

/// A parser error as `line N: ...`.
fn parse_error(text: &str, line: usize, info: &str) -> String {
    // An error found at the end of the text (an unclosed `{`) is on the last line written.
    let last = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .last()
        .map_or(1, |(i, _)| i + 1);
    let line = line.min(last);
    match info {
        // The scanner reads ahead and bounds flow nesting itself (255 levels): past that
        // it can stop before the builder has counted 32.
        "recursion limit exceeded" => too_deep(line),
        // In the words the policy's README and tests quote.
        "while parsing a flow mapping, did not find expected ',' or '}'" => {
            format!("line {line}: expected ',' or '}}' in a flow mapping")
        }
        "while parsing a flow sequence, expected ',' or ']'" => {
            format!("line {line}: expected ',' or ']' in a flow sequence")
        }
        _ => format!("line {line}: {info}"),
    }
}

/// A collection being read.
enum Open {
    /// A mapping, and the key read last (with its line) whose value comes next.
    Mapping(Map<String, Value>, Option<(String, usize)>),
    Sequence(Vec<Value>),
}

#[derive(Default)]
struct Builder {
    open: Vec<Open>,
    documents: usize,
    /// The document's value, once complete.
    done: Option<Value>,
}

fn too_deep(line: usize) -> String {
    format!("line {line}: nested more than {MAX_DEPTH} levels deep; registry entries are flat")
}

fn refused(line: usize, c: char) -> String {
    format!(
        "line {line}: '{c}' (anchors, aliases, tags) is not read here; use plain values or JSON"
    )
}

impl Builder {
    /// Takes one event; the document's value at the end of the stream.
    fn event(&mut self, event: Event<'_>, span: Span) -> Result<Option<Value>, String> {
        let line = span.start.line();
        match event {
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(format!(
                        "line {line}: only one YAML document is read; remove '---'"
                    ));
                }
            }
            Event::StreamEnd => return Ok(Some(self.done.take().unwrap_or(Value::Null))),
            Event::Alias(_) => return Err(refused(line, '*')),
            Event::Scalar(_, _, anchor, tag)
            | Event::SequenceStart(anchor, tag)
            | Event::MappingStart(anchor, tag)
                if anchor != 0 || tag.is_some() =>
            {
                return Err(refused(line, if anchor != 0 { '&' } else { '!' }));
            }
            Event::Scalar(text, style, ..) => {
                if let Some(Open::Mapping(_, key @ None)) = self.open.last_mut() {
                    *key = Some((key_text(&text, style), line));
                } else {
                    let value = match style {
                        ScalarStyle::Plain => plain(&text),
                        _ => Value::String(text.into_owned()),
                    };
                    self.add(value)?;
                }
            }
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                if let Some(Open::Mapping(_, None)) = self.open.last() {
                    return Err(format!(
                        "line {line}: a key must be a single value, not a list or a mapping"
                    ));
                }
                if self.open.len() >= MAX_DEPTH {
                    return Err(too_deep(line));
                }
                self.open
                    .push(if matches!(event, Event::SequenceStart(..)) {
                        Open::Sequence(Vec::new())
                    } else {
                        Open::Mapping(Map::new(), None)
                    });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let value = match self.open.pop() {
                    Some(Open::Sequence(items)) => Value::Array(items),
                    Some(Open::Mapping(map, _)) => Value::Object(map),
                    None => return Err(format!("line {line}: unexpected end of a collection")),
                };
                self.add(value)?;
            }
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => {}
        }
        Ok(None)
    }

    /// Puts a complete value where it belongs: under the pending key, at the end of the
    /// sequence, or as the document.
    fn add(&mut self, value: Value) -> Result<(), String> {
        match self.open.last_mut() {
            Some(Open::Sequence(items)) => items.push(value),
            Some(Open::Mapping(map, key)) => {
                let (key, line) = key.take().ok_or("a mapping value without a key")?;
                if map.contains_key(&key) {
                    return Err(format!("line {line}: '{key}' is given twice"));
                }
                map.insert(key, value);
            }
            None => self.done = Some(value),
        }
        Ok(())
    }
}

/// A key's text: as written, but a plain `~`/`null` is the empty key and plain numbers
/// and booleans are written the way JSON writes them.
fn key_text(text: &str, style: ScalarStyle) -> String {
    match style {
        ScalarStyle::Plain => match plain(text) {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        },
        _ => text.to_string(),
    }
}

/// A plain scalar's value: null, booleans, numbers, else a string.
fn plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let numeric = text
        .trim_start_matches(['-', '+'])
        .chars()
        .all(|c| c.is_ascii_digit() || c == '.')
        && text.chars().any(|c| c.is_ascii_digit());
    if numeric && let Ok(n) = text.trim_start_matches('+').parse::<Number>() {
        return Value::Number(n);
    }
    Value::String(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    #[test]
    fn reads_a_registry() {
        let text = r#"
---
# the models we serve
meta-llama/Llama-3.1-70B-Instruct:
  parametersBillions: 70.6   # total
  dtype: bf16
  layers: 80
  aliases:
    - llama-3.1-70b
    - "hf://meta-llama/Llama-3.1-70B-Instruct"
'mistralai/Mistral-7B': {vramGiB: 16, aliases: [mistral-7b, 'm7b']}
hf://Qwen/Qwen2.5-7B: {parametersBillions: "7.6", dtype: bf16}
"odd: name": {vramGiB: 1}
empty:
"#;
        assert_eq!(
            parse(text).unwrap(),
            json!({
                "meta-llama/Llama-3.1-70B-Instruct": {
                    "parametersBillions": 70.6, "dtype": "bf16", "layers": 80,
                    "aliases": ["llama-3.1-70b", "hf://meta-llama/Llama-3.1-70B-Instruct"]
                },
                "mistralai/Mistral-7B": {"vramGiB": 16, "aliases": ["mistral-7b", "m7b"]},
                "hf://Qwen/Qwen2.5-7B": {"parametersBillions": "7.6", "dtype": "bf16"},
                "odd: name": {"vramGiB": 1},
                "empty": null
            })
        );
    }

    #[test]
    fn sequences_at_the_key_indentation_and_scalars() {
        assert_eq!(
            parse("a:\n- x\n- 2\nb: ~\nc: true\nd: 'it''s'\ne: \"q\\\"x\"\nf: -3\ng: 1.5.2\n")
                .unwrap(),
            json!({"a": ["x", 2], "b": null, "c": true, "d": "it's", "e": "q\"x", "f": -3, "g": "1.5.2"})
        );
    }

    #[test]
    fn json_documents_are_read_as_json() {
        assert_eq!(
            parse("{\n  \"m\": {\"vramGiB\": 4}\n}").unwrap(),
            json!({"m": {"vramGiB": 4}})
        );
        assert!(parse("{\"m\": ").unwrap_err().starts_with("invalid JSON"));
    }

    #[test]
    fn empty_documents_are_null() {
        assert_eq!(parse("").unwrap(), Value::Null);
        assert_eq!(parse("# nothing\n---\n").unwrap(), Value::Null);
    }

    #[test]
    fn block_scalars_lists_of_mappings_and_multi_line_values_are_read() {
        assert_eq!(
            parse("a: |\n  two\n  lines\nb: >\n  one\n  line\nc:\n  - d: 1\n    e: x\nf: \"over\n  lines\"\n")
                .unwrap(),
            json!({"a": "two\nlines\n", "b": "one line\n", "c": [{"d": 1, "e": "x"}], "f": "over lines"})
        );
        // a document that is not a mapping is a value; the registry refuses it
        assert_eq!(parse("just text\n").unwrap(), json!("just text"));
        assert_eq!(parse("- a\n").unwrap(), json!(["a"]));
    }

    #[rstest]
    #[case::anchor(
        "a: &x 1\n",
        "line 1: '&' (anchors, aliases, tags) is not read here; use plain values or JSON"
    )]
    #[case::alias_without_anchor(
        "a: 1\nb: *x\n",
        "line 2: while parsing node, found unknown anchor"
    )]
    #[case::tag(
        "a: !!str 1\n",
        "line 1: '!' (anchors, aliases, tags) is not read here; use plain values or JSON"
    )]
    #[case::two_documents(
        "a: 1\n---\nb: 2\n",
        "line 2: only one YAML document is read; remove '---'"
    )]
    #[case::duplicate("a: 1\na: 2\n", "line 2: 'a' is given twice")]
    #[case::duplicate_in_flow("a: {b: 1, b: 2}\n", "line 1: 'b' is given twice")]
    #[case::complex_key(
        "[a]: 1\n",
        "line 1: a key must be a single value, not a list or a mapping"
    )]
    // YAML errors, as saphyr-parser words them
    #[case::tab(
        "a:\n\tb: 1\n",
        "line 2: tabs disallowed within this context (block indentation)"
    )]
    #[case::bad_indent(
        "a:\n    b: 1\n  c: 2\n",
        "line 3: while parsing a block mapping, did not find expected key"
    )]
    #[case::unclosed_flow("a: {b: 1\n", "line 1: expected ',' or '}' in a flow mapping")]
    #[case::unclosed_flow_sequence("a: [1\n\n", "line 1: expected ',' or ']' in a flow sequence")]
    #[case::missing_comma(
        "a: {b: 1,\n  c: 2\n  d: 3}\n",
        "line 3: expected ',' or '}' in a flow mapping"
    )]
    #[case::unclosed_quote(
        "a: \"x\n",
        "line 1: while scanning a quoted scalar, found unexpected end of stream"
    )]
    #[case::trailing(
        "a: [1] x\n",
        "line 1: while parsing a block mapping, did not find expected key"
    )]
    fn unsupported_or_broken_yaml_names_the_line(#[case] text: &str, #[case] message: &str) {
        assert_eq!(parse(text).unwrap_err(), message);
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let deep = |open: &str, close: &str, n: usize| {
            format!("m: {}1{}", open.repeat(n), close.repeat(n))
        };
        let message = "line 1: nested more than 32 levels deep; registry entries are flat";
        assert_eq!(parse(&deep("[", "]", 100_000)).unwrap_err(), message);
        assert_eq!(parse(&deep("{a: ", "}", 100_000)).unwrap_err(), message);
        assert!(parse(&deep("[", "]", 31)).is_ok());
        assert_eq!(parse(&deep("[", "]", 32)).unwrap_err(), message);
        let block: String = (0..40)
            .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
            .collect();
        assert_eq!(
            parse(&block).unwrap_err(),
            "line 33: nested more than 32 levels deep; registry entries are flat"
        );
    }

    #[test]
    fn comments_inside_quotes_are_kept() {
        assert_eq!(
            parse("a: \"x # y\" # comment\nb: c#d\n").unwrap(),
            json!({"a": "x # y", "b": "c#d"})
        );
    }
}
