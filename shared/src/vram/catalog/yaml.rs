//! A small YAML reader for the model registry ConfigMap.
//!
//! The registry is a mapping of model ids to flat entries, which is all this reads:
//! block mappings nested by indentation, block sequences of scalars (`- x`), flow
//! mappings and sequences on one line (`{a: 1, b: [x, y]}`), plain, single- and
//! double-quoted scalars, comments and a leading `---`. A document starting with `{` is
//! read as JSON. Anchors, tags, block scalars (`|`, `>`), multi-line scalars and several
//! documents are refused with the line number, rather than misread.

use serde_json::{Map, Number, Value};

/// Deepest nesting read (block levels and flow collections together). Registry entries
/// nest three levels; without a bound `[[[...` recursed until the stack overflowed (a trap).
const MAX_DEPTH: usize = 32;

/// Parses `text` into JSON values; errors are `line N: ...`.
pub fn parse(text: &str) -> Result<Value, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"));
    }
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let number = i + 1;
        let content = strip_comment(raw);
        let trimmed = content.trim_end();
        if trimmed.trim().is_empty() {
            continue;
        }
        let indent = trimmed.len() - trimmed.trim_start().len();
        if trimmed[..indent].contains('\t') {
            return Err(format!(
                "line {number}: tabs cannot indent YAML; use spaces"
            ));
        }
        let body = trimmed.trim_start();
        if indent == 0 && body == "---" && lines.is_empty() {
            continue;
        }
        if indent == 0 && (body == "---" || body == "...") {
            return Err(format!(
                "line {number}: only one YAML document is read; remove '{body}'"
            ));
        }
        lines.push(Line {
            number,
            indent,
            body,
        });
    }
    let Some(first) = lines.first() else {
        return Ok(Value::Null);
    };
    let mut reader = Reader {
        lines: &lines,
        at: 0,
        depth: 0,
    };
    let value = reader.node(first.indent)?;
    if let Some(extra) = lines.get(reader.at) {
        return Err(format!(
            "line {}: unexpected indentation or content",
            extra.number
        ));
    }
    Ok(value)
}

struct Line<'a> {
    number: usize,
    indent: usize,
    body: &'a str,
}

struct Reader<'a> {
    lines: &'a [Line<'a>],
    at: usize,
    /// Block levels entered.
    depth: usize,
}

fn too_deep(line: usize) -> String {
    format!("line {line}: nested more than {MAX_DEPTH} levels deep; registry entries are flat")
}

fn is_item(body: &str) -> bool {
    body == "-" || body.starts_with("- ")
}

impl Reader<'_> {
    fn node(&mut self, indent: usize) -> Result<Value, String> {
        if let Some(line) = self.lines.get(self.at)
            && self.depth >= MAX_DEPTH
        {
            return Err(too_deep(line.number));
        }
        self.depth += 1;
        let value = match self.lines.get(self.at) {
            Some(line) if is_item(line.body) => self.sequence(indent),
            Some(_) => self.mapping(indent),
            None => Ok(Value::Null),
        };
        self.depth -= 1;
        value
    }

    fn mapping(&mut self, indent: usize) -> Result<Value, String> {
        let mut map = Map::new();
        while let Some(line) = self.lines.get(self.at) {
            if line.indent < indent {
                break;
            }
            if line.indent > indent || is_item(line.body) {
                return Err(format!(
                    "line {}: unexpected indentation or content",
                    line.number
                ));
            }
            let (key, rest) = split_key(line.body).ok_or_else(|| {
                format!(
                    "line {}: expected 'key: value', got '{}'",
                    line.number, line.body
                )
            })?;
            let key = scalar_text(key, line.number)?;
            self.at += 1;
            let value = if rest.is_empty() {
                match self.lines.get(self.at) {
                    Some(next) if next.indent > indent => self.node(next.indent)?,
                    // `key:` followed by `- item` at the same indentation is a sequence.
                    Some(next) if next.indent == indent && is_item(next.body) => {
                        self.sequence(indent)?
                    }
                    _ => Value::Null,
                }
            } else {
                inline(rest, line.number)?
            };
            if map.contains_key(&key) {
                return Err(format!("line {}: '{key}' is given twice", line.number));
            }
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }

    fn sequence(&mut self, indent: usize) -> Result<Value, String> {
        let mut items = Vec::new();
        while let Some(line) = self.lines.get(self.at) {
            if line.indent < indent || (line.indent == indent && !is_item(line.body)) {
                break;
            }
            if line.indent > indent {
                return Err(format!(
                    "line {}: unexpected indentation or content",
                    line.number
                ));
            }
            let rest = line.body[1..].trim();
            if rest.is_empty() || split_key(rest).is_some() {
                return Err(format!(
                    "line {}: lists of mappings are not read here; write the item on one line, e.g. '- {{a: 1}}', or use JSON",
                    line.number
                ));
            }
            items.push(inline(rest, line.number)?);
            self.at += 1;
        }
        Ok(Value::Array(items))
    }
}

/// Cuts ` # comment` (outside quotes) off a line.
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev_space = true;
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && prev_space => return &line[..i],
            None => {}
        }
        prev_space = c == ' ' || c == '\t';
    }
    line
}

/// Splits `key: rest` at the first `:` followed by a space or the end, outside quotes
/// and brackets. `None` when the text is not a mapping entry.
fn split_key(body: &str) -> Option<(&str, &str)> {
    let mut quote: Option<char> = None;
    let mut depth = 0usize;
    let bytes = body.as_bytes();
    for (i, c) in body.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '"' | '\'' if i == 0 => quote = Some(c),
                '{' | '[' if i == 0 || depth > 0 => depth += 1,
                '}' | ']' if depth > 0 => depth -= 1,
                ':' if depth == 0 => {
                    let next = bytes.get(i + 1);
                    if next.is_none() || next == Some(&b' ') {
                        let key = body[..i].trim();
                        return (!key.is_empty()).then(|| (key, body[i + 1..].trim()));
                    }
                }
                _ => {}
            },
        }
    }
    None
}

/// A key's text: quoted or plain.
fn scalar_text(text: &str, line: usize) -> Result<String, String> {
    let mut flow = Flow {
        chars: text.chars().collect(),
        at: 0,
        line,
        depth: 0,
    };
    let value = flow.scalar(&[])?;
    flow.skip_spaces();
    if flow.at != flow.chars.len() {
        return Err(format!("line {line}: cannot read '{text}'"));
    }
    Ok(match value {
        Value::String(s) => s,
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// A value written on one line: a flow collection or a scalar.
fn inline(text: &str, line: usize) -> Result<Value, String> {
    if let Some(c) = text.chars().next()
        && matches!(c, '&' | '*' | '!' | '|' | '>' | '%' | '@' | '`')
    {
        return Err(format!(
            "line {line}: '{c}' (anchors, aliases, tags, block scalars) is not read here; use plain values or JSON"
        ));
    }
    let mut flow = Flow {
        chars: text.chars().collect(),
        at: 0,
        line,
        depth: 0,
    };
    let value = flow.value(&[])?;
    flow.skip_spaces();
    if flow.at != flow.chars.len() {
        return Err(format!(
            "line {line}: unexpected text after the value in '{text}'"
        ));
    }
    Ok(value)
}

struct Flow {
    chars: Vec<char>,
    at: usize,
    line: usize,
    /// Flow collections entered.
    depth: usize,
}

impl Flow {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(' ') {
            self.at += 1;
        }
    }

    fn err(&self, what: &str) -> String {
        format!("line {}: {what}", self.line)
    }

    fn value(&mut self, stops: &[char]) -> Result<Value, String> {
        self.skip_spaces();
        let open = self.peek();
        if !matches!(open, Some('{' | '[')) {
            return self.scalar(stops);
        }
        if self.depth >= MAX_DEPTH {
            return Err(too_deep(self.line));
        }
        self.depth += 1;
        let value = if open == Some('{') {
            self.map()
        } else {
            self.list()
        };
        self.depth -= 1;
        value
    }

    fn map(&mut self) -> Result<Value, String> {
        self.at += 1;
        let mut map = Map::new();
        loop {
            self.skip_spaces();
            if self.peek() == Some('}') {
                self.at += 1;
                return Ok(Value::Object(map));
            }
            let key = match self.scalar(&[':', ',', '}'])? {
                Value::String(s) => s,
                other => other.to_string(),
            };
            self.skip_spaces();
            if self.peek() != Some(':') {
                return Err(self.err(&format!("expected ':' after '{key}' in a flow mapping")));
            }
            self.at += 1;
            let value = self.value(&[',', '}'])?;
            if map.insert(key.clone(), value).is_some() {
                return Err(self.err(&format!("'{key}' is given twice")));
            }
            self.skip_spaces();
            match self.peek() {
                Some(',') => self.at += 1,
                Some('}') => {}
                _ => return Err(self.err("expected ',' or '}' in a flow mapping")),
            }
        }
    }

    fn list(&mut self) -> Result<Value, String> {
        self.at += 1;
        let mut items = Vec::new();
        loop {
            self.skip_spaces();
            if self.peek() == Some(']') {
                self.at += 1;
                return Ok(Value::Array(items));
            }
            items.push(self.value(&[',', ']'])?);
            self.skip_spaces();
            match self.peek() {
                Some(',') => self.at += 1,
                Some(']') => {}
                _ => return Err(self.err("expected ',' or ']' in a flow sequence")),
            }
        }
    }

    /// A quoted scalar, or a plain one up to one of `stops` (in a flow collection a `:`
    /// stop only counts before a space, so `hf://x` stays one scalar).
    fn scalar(&mut self, stops: &[char]) -> Result<Value, String> {
        self.skip_spaces();
        match self.peek() {
            Some('"') => self.double_quoted().map(Value::String),
            Some('\'') => self.single_quoted().map(Value::String),
            None => Ok(Value::Null),
            Some(_) => {
                let start = self.at;
                while let Some(c) = self.peek() {
                    let stop = if c == ':' {
                        stops.contains(&':')
                            && matches!(self.chars.get(self.at + 1), None | Some(' '))
                    } else {
                        stops.contains(&c)
                    };
                    if stop {
                        break;
                    }
                    self.at += 1;
                }
                let text: String = self.chars[start..self.at].iter().collect();
                Ok(plain(text.trim()))
            }
        }
    }

    fn double_quoted(&mut self) -> Result<String, String> {
        self.at += 1;
        let mut out = String::new();
        while let Some(c) = self.peek() {
            self.at += 1;
            match c {
                '"' => return Ok(out),
                '\\' => {
                    let escaped = self.peek().ok_or_else(|| self.err("unfinished escape"))?;
                    self.at += 1;
                    out.push(match escaped {
                        'n' => '\n',
                        't' => '\t',
                        '"' => '"',
                        '\\' => '\\',
                        '/' => '/',
                        other => {
                            return Err(self.err(&format!("escape '\\{other}' is not read here")));
                        }
                    });
                }
                other => out.push(other),
            }
        }
        Err(self.err("a double-quoted string is not closed on its line"))
    }

    fn single_quoted(&mut self) -> Result<String, String> {
        self.at += 1;
        let mut out = String::new();
        while let Some(c) = self.peek() {
            self.at += 1;
            if c == '\'' {
                if self.peek() == Some('\'') {
                    self.at += 1;
                    out.push('\'');
                } else {
                    return Ok(out);
                }
            } else {
                out.push(c);
            }
        }
        Err(self.err("a single-quoted string is not closed on its line"))
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

    #[rstest]
    #[case::tab("a:\n\tb: 1\n", "line 2: tabs cannot indent YAML; use spaces")]
    #[case::anchor(
        "a: &x 1\n",
        "line 1: '&' (anchors, aliases, tags, block scalars) is not read here; use plain values or JSON"
    )]
    #[case::block_scalar(
        "a: |\n  text\n",
        "line 1: '|' (anchors, aliases, tags, block scalars) is not read here; use plain values or JSON"
    )]
    #[case::two_documents(
        "a: 1\n---\nb: 2\n",
        "line 2: only one YAML document is read; remove '---'"
    )]
    #[case::duplicate("a: 1\na: 2\n", "line 2: 'a' is given twice")]
    #[case::bad_indent("a:\n    b: 1\n  c: 2\n", "line 3: unexpected indentation or content")]
    #[case::not_a_mapping("just text\n", "line 1: expected 'key: value', got 'just text'")]
    #[case::list_of_maps(
        "a:\n  - b: 1\n",
        "line 2: lists of mappings are not read here; write the item on one line, e.g. '- {a: 1}', or use JSON"
    )]
    #[case::unclosed_flow("a: {b: 1\n", "line 1: expected ',' or '}' in a flow mapping")]
    #[case::unclosed_quote("a: \"x\n", "line 1: a double-quoted string is not closed on its line")]
    #[case::trailing("a: [1] x\n", "line 1: unexpected text after the value in '[1] x'")]
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
