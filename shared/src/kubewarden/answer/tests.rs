use super::*;
use serde_json::json;
use std::path::Path;

fn written(value: &Value) -> String {
    let mut out = Vec::new();
    write_value(&mut out, value);
    String::from_utf8(out).expect("the writer writes UTF-8")
}

fn serde(value: &Value) -> String {
    serde_json::to_string(value).expect("a Value serializes")
}

#[test]
fn every_ascii_and_some_wider_characters_are_escaped_as_serde_escapes_them() {
    let mut specials: Vec<String> = (0u8..0x80).map(|b| char::from(b).to_string()).collect();
    specials.extend(["é", "€", "😀", "\u{2028}", "a\"b\\c"].map(String::from));
    for special in &specials {
        // Every position of the special character relative to the eight-byte words.
        for before in 0..18 {
            for after in [0, 1, 7, 8, 9] {
                let s = format!("{}{special}{}", "x".repeat(before), "y".repeat(after));
                let v = Value::String(s.clone());
                assert_eq!(written(&v), serde(&v), "{s:?}");
            }
        }
    }
}

#[test]
fn strings_made_only_of_escapes_and_long_clean_runs_match() {
    for s in [
        String::new(),
        "\"".repeat(33),
        "\\\n\t\r\u{8}\u{c}\u{0}\u{1f}".repeat(5),
        "clean text without any escape at all, long enough for many words".repeat(9),
        format!("{}\"{}", "é".repeat(20), "\u{1}".repeat(3)),
    ] {
        let v = Value::String(s.clone());
        assert_eq!(written(&v), serde(&v), "{s:?}");
    }
}

#[test]
fn the_scan_flags_exactly_the_words_holding_a_byte_to_escape() {
    for b in 0u8..=255 {
        for at in 0..8 {
            let mut word = *b"abcdefgh";
            word[at] = b;
            let flagged = needs_escape(u64::from_le_bytes(word));
            let expected = b < 0x20 || b == b'"' || b == b'\\';
            assert_eq!(flagged, expected, "byte {b:#x} at {at}");
        }
    }
    // Neighbours that could borrow into each other.
    for word in [
        [0x1f, 0x20, 0x21, 0x22, 0x5b, 0x5c, 0x5d, 0x80],
        [0xff; 8],
        [0x20; 8],
    ] {
        let expected = word.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\');
        assert_eq!(
            needs_escape(u64::from_le_bytes(word)),
            expected,
            "{word:x?}"
        );
    }
}

#[test]
fn numbers_nesting_and_empty_containers_match() {
    let v = json!({
        "u": u64::MAX, "i": i64::MIN, "zero": 0, "neg": -17,
        "f": [0.1, 1.5, -0.0, 1e300, 2.5e-8, 123456789.125, f64::MAX, f64::MIN_POSITIVE],
        "empty": {}, "list": [], "nested": [[{"a": [null, true, false, {"b": "\u{7f}"}]}]],
        "": "empty key", "key \"quoted\"\n": 1
    });
    assert_eq!(written(&v), serde(&v));
}

#[test]
fn every_object_in_the_policies_test_data_is_written_as_serde_writes_it() {
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
    let mut seen = 0;
    for policy in std::fs::read_dir(&policies).expect("the policies directory") {
        let data = policy.expect("a directory entry").path().join("test_data");
        let Ok(files) = std::fs::read_dir(&data) else {
            continue;
        };
        for file in files {
            let path = file.expect("a directory entry").path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a readable file");
            let Ok(v) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            assert_eq!(written(&v), serde(&v), "{}", path.display());
            seen += 1;
        }
    }
    assert!(seen > 100, "only {seen} test_data documents were read");
}

#[test]
fn answers_match_the_derived_serialization() {
    let object = json!({"kind": "Pod", "metadata": {"labels": {"gpu-admission/pool": "batch"}}});
    let annotations: BTreeMap<String, String> = [
        (
            "gpu-admission/fit".to_string(),
            "8 GiB \"of\" 40\n".to_string(),
        ),
        ("a".to_string(), String::new()),
    ]
    .into();
    let empty = BTreeMap::new();
    let warnings = vec!["first \\ warning".to_string(), "\u{1}second".to_string()];
    for accepted in [true, false] {
        for message in [None, Some("no: \"team\" label\tmissing")] {
            for code in [None, Some(400), Some(413)] {
                for mutated_object in [None, Some(&object)] {
                    for audit_annotations in [None, Some(&annotations), Some(&empty)] {
                        for warnings in [None, Some(warnings.as_slice()), Some(&[][..])] {
                            let answer = Answer {
                                accepted,
                                message,
                                code,
                                mutated_object,
                                audit_annotations,
                                warnings,
                            };
                            assert_eq!(
                                String::from_utf8(answer.to_json()).expect("UTF-8"),
                                serde_json::to_string(&answer).expect("serializes"),
                            );
                        }
                    }
                }
            }
        }
    }
}
