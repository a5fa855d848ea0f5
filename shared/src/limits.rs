//! Every bound the policies put on what they read, in one place.
//!
//! Admission requests are written by users, so a policy must answer any of them within
//! bounded time and memory, and never trap (a trap is a 500: with `failurePolicy: Fail` it
//! blocks every deploy, with `Ignore` it lets everything through). Each limit below is
//! checked before any per-item work, and a request beyond it is *denied with a message
//! that names the limit*, never truncated silently.
//!
//! | limit | value | checked by | beyond it |
//! |---|---|---|---|
//! | [`MAX_REQUEST_BYTES`] | 8 MiB | the waPC glue, before parsing | denied, code 413 |
//! | [`MAX_REQUEST_VALUES`] | 200,000 | the waPC glue, before parsing | denied, code 413 |
//! | [`MAX_JSON_DEPTH`] | 127 levels | serde_json, while parsing | denied, code 400 |
//! | [`MAX_SETTINGS_BYTES`] | 1 MiB | `validate_settings`, before parsing | invalid settings |
//! | [`MAX_TEMPLATES`] | 64 per object | [`crate::workload`] | denied by every policy |
//! | [`MAX_CONTAINERS`] | 256 per pod template | [`crate::workload`] | denied by every policy |
//! | [`MAX_RESOURCES`] | 64 per limits or requests | [`crate::workload`] | denied by every policy |
//! | [`MAX_LISTED`] | 10 per list | labels and routing messages | counted, not listed |
//! | [`MAX_MESSAGE_BYTES`] | 16 KiB | the waPC glue, on every answer | cut, and says so |
//!
//! The size limits answer 413 (Request Entity Too Large), the code the API server itself
//! gives a body over its own limit: policy-evaluator copies a policy's code into the
//! `AdmissionResponse` and the API server passes codes of 400 and above to the client.

/// One mebibyte.
pub const MIB: usize = 1024 * 1024;

/// The largest request body the API server accepts: kube-apiserver's
/// `MaxRequestBodyBytes`, 3 MiB (twice etcd's recommended 1.5 MiB request size). Quoted in
/// messages; not a limit of the policies.
pub const API_SERVER_MAX_BODY_BYTES: usize = 3 * MIB;

/// The largest `validate` payload a policy reads: `{"request", "settings"}`, where an
/// UPDATE's request carries both `object` and `oldObject`, each up to
/// [`API_SERVER_MAX_BODY_BYTES`], plus the settings. Larger payloads are denied (413)
/// before they are parsed.
pub const MAX_REQUEST_BYTES: usize = 8 * MIB;

/// The most JSON values (every scalar, array and object, at any depth) a `validate`
/// payload may hold. Bytes alone do not bound memory: `0,` is two bytes of JSON and a
/// `serde_json::Value` in the guest, `{"a":0},` eight bytes and a whole map, so a payload
/// under [`MAX_REQUEST_BYTES`] could expand to hundreds of MiB. A Deployment holds a few
/// hundred values, a large custom resource with its managedFields a few tens of
/// thousands. Counted by [`json_values`] before parsing; more is denied (413).
pub const MAX_REQUEST_VALUES: usize = 200_000;

/// How deeply JSON may nest: serde_json's own recursion limit of 128, which it enforces
/// while parsing (the 128th nested array or object is an error, not a stack overflow). It
/// counts the whole payload, so an object inside a `validate` payload may nest 125 levels.
pub const MAX_JSON_DEPTH: usize = 127;

/// The largest settings payload `validate_settings` reads. Settings are written by the
/// operator, and stored in a (Cluster)AdmissionPolicy, itself limited by etcd to about
/// 1.5 MiB; real settings are a few KiB.
pub const MAX_SETTINGS_BYTES: usize = MIB;

/// The most pod templates one object may carry (a RayCluster with 63 worker groups).
/// More is denied rather than truncated.
pub const MAX_TEMPLATES: usize = 64;

/// The most containers one pod template may have: `containers`, `initContainers` and
/// `ephemeralContainers` together (and, for KServe, the model-server shortcut
/// containers). Real pods have a handful; a pod of thousands of containers could not be
/// scheduled anyway. Counted on the raw JSON before any container is read; more is
/// denied by every policy, naming the template.
pub const MAX_CONTAINERS: usize = 256;

/// The most resource names one `resources.limits` or `resources.requests` may hold (of a
/// container, or pod-level). Real ones hold a handful (cpu, memory, ephemeral-storage, a
/// GPU, hugepages); every GPU name is checked and may be reported, so 600 made-up names in
/// each of 256 containers would cost seconds. Counted on the raw JSON before reading;
/// more is denied by every policy, naming the list.
pub const MAX_RESOURCES: usize = 64;

/// The most items of one list a message spells out (the problems of a denial, the labels
/// of a template); the rest are counted ("and 153848 more problems"). Users read these in
/// `kubectl`'s output: an object with a problem in each of 150,000 resource entries must
/// not produce a 20 MB message.
pub const MAX_LISTED: usize = 10;

/// The longest message a policy answers with, whatever produced it: a safety net behind
/// [`MAX_LISTED`]. A longer one is cut at a character boundary, and says so.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024;

/// `message`, cut to at most [`MAX_MESSAGE_BYTES`] (the note included) when longer.
pub fn cap_message(message: String) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message;
    }
    let note = format!(
        " [cut: the whole message is {} bytes; gpu-admission policies answer with at most {MAX_MESSAGE_BYTES}]",
        message.len()
    );
    let mut end = MAX_MESSAGE_BYTES - note.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{note}", &message[..end])
}

/// `bytes` as mebibytes with one decimal, rounded *up*, so a size just over a limit never
/// reads as the limit itself: `8 MiB + 1 byte` is "8.1 MiB".
pub fn mib_text(bytes: usize) -> String {
    let tenths = (bytes as u64 * 10).div_ceil(MIB as u64);
    format!("{}.{} MiB", tenths / 10, tenths % 10)
}

/// Whole mebibytes, for quoting a limit: "8 MiB".
fn limit_text(bytes: usize) -> String {
    format!("{} MiB", bytes / MIB)
}

/// Checks a `validate` payload against [`MAX_REQUEST_BYTES`] and [`MAX_REQUEST_VALUES`];
/// the error is the message users see.
pub fn check_request(payload: &[u8]) -> Result<(), String> {
    if payload.len() > MAX_REQUEST_BYTES {
        return Err(format!(
            "the admission request is {}; gpu-admission policies read at most {} (the API server itself accepts objects up to {})",
            mib_text(payload.len()),
            limit_text(MAX_REQUEST_BYTES),
            limit_text(API_SERVER_MAX_BODY_BYTES)
        ));
    }
    // Every value holds at least one byte of its own, and json_values counts at most two
    // per byte (plus the root) on any input, valid or not: a payload this short cannot be
    // over the limit, and is not scanned.
    if 2 * payload.len() < MAX_REQUEST_VALUES {
        return Ok(());
    }
    let values = json_values(payload);
    if values > MAX_REQUEST_VALUES {
        return Err(format!(
            "the admission request holds {values} JSON values; gpu-admission policies read at most {MAX_REQUEST_VALUES} (a Deployment holds a few hundred)"
        ));
    }
    Ok(())
}

/// Checks a `validate_settings` payload against [`MAX_SETTINGS_BYTES`]; the error is the
/// message operators see (after `settings: `).
pub fn check_settings(payload: &[u8]) -> Result<(), String> {
    if payload.len() > MAX_SETTINGS_BYTES {
        return Err(format!(
            "the settings are {}; gpu-admission policies read at most {} of settings",
            mib_text(payload.len()),
            limit_text(MAX_SETTINGS_BYTES)
        ));
    }
    Ok(())
}

/// The message for serde_json's "recursion limit exceeded" error, which says neither the
/// limit nor why.
pub fn too_deep_text(line: usize, column: usize) -> String {
    format!(
        "its JSON is nested more than {MAX_JSON_DEPTH} levels deep (at line {line}, column {column}); gpu-admission policies read at most {MAX_JSON_DEPTH} levels"
    )
}

/// The bytes of `json` outside strings, in order; each string is one `"` (its opening
/// quote), its contents and closing quote skipped (escapes included).
fn outside_strings(json: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let mut in_string = false;
    let mut escaped = false;
    json.iter().copied().filter(move |&b| {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            return false;
        }
        if b == b'"' {
            in_string = true;
        }
        true
    })
}

/// The number of JSON values in `json` (every scalar, array and object, at any depth;
/// object keys are not values), counted in one pass without parsing: one for the root,
/// one per comma, and one per non-empty array or object (its first element has no comma
/// before it). Exact for valid JSON; for anything else a number the parser then rejects.
pub fn json_values(json: &[u8]) -> usize {
    let mut values = 1;
    // Just after `[` or `{`: the next significant byte says whether it is empty.
    let mut opened = false;
    for b in outside_strings(json) {
        if b.is_ascii_whitespace() {
            continue;
        }
        if opened && b != b']' && b != b'}' {
            values += 1;
        }
        opened = false;
        match b {
            b',' => values += 1,
            b'[' | b'{' => opened = true,
            _ => {}
        }
    }
    values
}

/// How deeply arrays and objects nest in `json` (0 for a scalar), in one pass without
/// parsing; for invalid JSON, the deepest bracket reached.
pub fn json_depth(json: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for b in outside_strings(json) {
        match b {
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The exact number of values of a parsed document.
    fn count(v: &Value) -> usize {
        1 + match v {
            Value::Array(items) => items.iter().map(count).sum(),
            Value::Object(map) => map.values().map(count).sum(),
            _ => 0,
        }
    }

    #[test]
    fn json_values_counts_every_value_once() {
        for v in [
            json!(null),
            json!([]),
            json!({}),
            json!([[]]),
            json!([{}, [], [[]], {"a": {}}]),
            json!({"a": [1, 2, {"b": "x,y[{"}], "c\"[,": "\\", "d": [true, false, null]}),
            json!({"spec": {"containers": [{"name": "a", "args": ["--x", "{"]}], "replicas": 3}}),
        ] {
            assert_eq!(json_values(v.to_string().as_bytes()), count(&v), "{v}");
            let pretty = serde_json::to_string_pretty(&v).unwrap();
            assert_eq!(json_values(pretty.as_bytes()), count(&v), "{pretty}");
        }
    }

    #[test]
    fn request_size_at_the_limit_is_read_one_byte_over_is_denied() {
        // Spaces are valid JSON padding and hold no values.
        let at_limit = vec![b' '; MAX_REQUEST_BYTES];
        check_request(&at_limit).unwrap();
        let over = vec![b' '; MAX_REQUEST_BYTES + 1];
        assert_eq!(
            check_request(&over).unwrap_err(),
            "the admission request is 8.1 MiB; gpu-admission policies read at most 8 MiB (the API server itself accepts objects up to 3 MiB)"
        );
        let ten_mb = vec![b' '; 10_700_000];
        assert!(
            check_request(&ten_mb)
                .unwrap_err()
                .starts_with("the admission request is 10.3 MiB;")
        );
    }

    #[test]
    fn request_values_at_the_limit_are_read_one_more_is_denied() {
        // [0,0,...]: the array and its elements.
        let array = |elements: usize| {
            let mut s = String::from("[");
            s.push_str(&vec!["0"; elements].join(","));
            s.push(']');
            s
        };
        let at_limit = array(MAX_REQUEST_VALUES - 1);
        assert_eq!(json_values(at_limit.as_bytes()), MAX_REQUEST_VALUES);
        check_request(at_limit.as_bytes()).unwrap();
        assert_eq!(
            check_request(array(MAX_REQUEST_VALUES).as_bytes()).unwrap_err(),
            format!(
                "the admission request holds {} JSON values; gpu-admission policies read at most {MAX_REQUEST_VALUES} (a Deployment holds a few hundred)",
                MAX_REQUEST_VALUES + 1
            )
        );
    }

    #[test]
    fn payloads_under_half_the_value_limit_in_bytes_are_under_it_in_values() {
        // The inputs json_values counts most on, at the longest length not scanned.
        let len = MAX_REQUEST_VALUES / 2 - 1;
        for unit in ["0,", "[,", "[[,", "[", "{\"\":[],"] {
            let text = unit.repeat(len / unit.len() + 1);
            let text = &text[..len];
            let values = json_values(text.as_bytes());
            assert!(
                values <= 1 + 2 * len && values <= MAX_REQUEST_VALUES,
                "{unit}: {values}"
            );
            check_request(text.as_bytes()).unwrap();
        }
        // One value per byte counts exactly either side of the shortcut.
        let array = |elements: usize| format!("[{}]", vec!["0"; elements].join(","));
        let short = array(MAX_REQUEST_VALUES / 4 - 1);
        assert!(2 * short.len() < MAX_REQUEST_VALUES);
        assert_eq!(json_values(short.as_bytes()), MAX_REQUEST_VALUES / 4);
    }

    #[test]
    fn json_depth_counts_brackets_outside_strings() {
        for (json, depth) in [
            ("0", 0),
            ("[]", 1),
            (r#"{"a": [1, {"b": []}], "c": {}}"#, 4),
            (r#"{"a": "[[[{{{", "b": "\"[["}"#, 1),
            (r#"[[[]], [[[]]]]"#, 4),
        ] {
            assert_eq!(json_depth(json.as_bytes()), depth, "{json}");
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(json_depth(deep.as_bytes()), 200);
    }

    #[test]
    fn settings_size_at_the_limit_is_read_one_byte_over_is_invalid() {
        check_settings(&vec![b' '; MAX_SETTINGS_BYTES]).unwrap();
        assert_eq!(
            check_settings(&vec![b' '; MAX_SETTINGS_BYTES + 1]).unwrap_err(),
            "the settings are 1.1 MiB; gpu-admission policies read at most 1 MiB of settings"
        );
    }

    #[test]
    fn messages_at_the_limit_are_kept_longer_ones_are_cut_and_say_so() {
        let at_limit = "é".repeat(MAX_MESSAGE_BYTES / 2);
        assert_eq!(cap_message(at_limit.clone()), at_limit);
        let long = format!("x{at_limit}");
        let cut = cap_message(long);
        assert!(cut.len() <= MAX_MESSAGE_BYTES, "{}", cut.len());
        assert!(cut.starts_with("xéé"));
        assert!(
            cut.ends_with(
                "é [cut: the whole message is 16385 bytes; gpu-admission policies answer with at most 16384]"
            ),
            "{}",
            &cut[cut.len() - 120..]
        );
    }

    #[test]
    fn mebibytes_round_up() {
        assert_eq!(mib_text(0), "0.0 MiB");
        assert_eq!(mib_text(MIB), "1.0 MiB");
        assert_eq!(mib_text(MIB + 1), "1.1 MiB");
        assert_eq!(mib_text(10_000_000), "9.6 MiB");
        assert_eq!(mib_text(8 * MIB), "8.0 MiB");
    }

    #[test]
    fn serde_json_stops_at_the_128th_level() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        serde_json::from_str::<Value>(&nested(MAX_JSON_DEPTH)).unwrap();
        let err = serde_json::from_str::<Value>(&nested(MAX_JSON_DEPTH + 1)).unwrap_err();
        assert!(
            err.to_string().starts_with("recursion limit exceeded"),
            "{err}"
        );
        // Far deeper input is the same error, not a stack overflow.
        assert!(serde_json::from_str::<Value>(&nested(100_000)).is_err());
    }
}
