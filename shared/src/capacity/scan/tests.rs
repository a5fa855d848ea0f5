use super::*;
use rstest::rstest;

/// The specs the scanner finds, as strings (`-` for an item without spec).
fn specs(text: &str) -> Result<Vec<String>, ScanError> {
    let mut out = Vec::new();
    for_each_item_spec(text.as_bytes(), |spec| -> Result<(), ScanError> {
        out.push(match spec {
            Some(s) => String::from_utf8(s.to_vec()).unwrap(),
            None => "-".into(),
        });
        Ok(())
    })?;
    Ok(out)
}

#[rstest]
#[case::plain(r#"{"items": [{"spec": {"a": 1}}]}"#, &[r#"{"a": 1}"#])]
#[case::metadata_first(r#"{"kind":"PodList","items":[{"metadata":{"name":"p","labels":{"a":"}{]["}},"spec":{"x":[1,{"y":"\"}"}]},"status":{}}]}"#, &[r#"{"x":[1,{"y":"\"}"}]}"#])]
#[case::items_last(r#"{"metadata": {"resourceVersion": "1", "x": [{"items": [1]}]}, "items": [{"spec": null}, {}]}"#, &["null", "-"])]
#[case::whitespace(" {\n \"items\" : [ { \"spec\" : { } } , { \"metadata\" : { } } ] } \n", &["{ }", "-"])]
#[case::scalars(r#"{"items": [{"a": true, "b": -1.5e3, "c": null, "spec": "text", "d": false}]}"#, &[r#""text""#])]
#[case::escaped_backslash(r#"{"items": [{"metadata": {"a": "\\"}, "spec": {}}]}"#, &["{}"])]
#[case::unicode(r#"{"items": [{"metadata": {"a": "é ☃ \u00e9"}, "spec": {"é": 1}}]}"#, &[r#"{"é": 1}"#])]
#[case::no_items(r#"{"kind": "PodList"}"#, &[])]
#[case::null_items(r#"{"items": null}"#, &[])]
#[case::empty_items(r#"{"items": []}"#, &[])]
#[case::empty_object("{}", &[])]
fn finds_each_spec(#[case] text: &str, #[case] expected: &[&str]) {
    assert_eq!(specs(text).unwrap(), expected);
}

#[rstest]
#[case::empty("")]
#[case::not_an_object("[]")]
#[case::truncated_item(r#"{"items": [{"spec": {"a": 1}"#)]
#[case::truncated_string(r#"{"items": [{"metadata": {"a": "x}]}"#)]
#[case::unbalanced(r#"{"items": [{"metadata": {"a": [1, 2}}]"#)]
#[case::item_not_an_object(r#"{"items": [5]}"#)]
#[case::items_not_a_list(r#"{"items": 5}"#)]
#[case::missing_colon(r#"{"items" [{}]}"#)]
#[case::missing_comma(r#"{"items": [{} {}]}"#)]
#[case::trailing(r#"{"items": []} x"#)]
#[case::two_documents(r#"{} {}"#)]
#[case::bare_key(r#"{items: []}"#)]
#[case::missing_value(r#"{"items": [{"spec": }]}"#)]
fn malformed_lists_are_errors(#[case] text: &str) {
    assert!(specs(text).is_err(), "{text}");
}

#[test]
fn errors_say_where() {
    let e = specs(r#"{"items": 5}"#).unwrap_err();
    assert_eq!(e.to_string(), "expected '[' opening items at byte 10");
}

#[test]
fn callback_errors_stop_the_scan() {
    let mut seen = 0;
    let r = for_each_item_spec(br#"{"items": [{}, {}, {}]}"#, |_| {
        seen += 1;
        if seen == 2 {
            Err(ScanError {
                offset: 0,
                expected: "stop",
            })
        } else {
            Ok(())
        }
    });
    assert!(r.is_err());
    assert_eq!(seen, 2);
}

/// The scanner agrees with serde_json on arbitrary JSON lists.
#[cfg(not(target_arch = "wasm32"))]
mod properties {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            // Exact binary fractions: serde_json's default float parsing round-trips them.
            (-4000i32..4000).prop_map(|n| Value::from(f64::from(n) / 4.0)),
            ".*".prop_map(Value::from),
            r#"[\\"{}\[\],:]{0,6}"#.prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map("[a-z\"\\\\{}]{0,6}|spec|items", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn item() -> impl Strategy<Value = Value> {
        prop::collection::btree_map("[a-z]{1,8}|spec|metadata|status", json(), 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    proptest! {
        #[test]
        fn agrees_with_serde_json(items in prop::collection::vec(item(), 0..6), extra in json(), pretty in any::<bool>()) {
            let list = serde_json::json!({"kind": "PodList", "metadata": extra, "items": items});
            let text = if pretty { serde_json::to_string_pretty(&list) } else { serde_json::to_string(&list) }.unwrap();
            let mut found: Vec<Option<Value>> = Vec::new();
            for_each_item_spec(text.as_bytes(), |spec| -> Result<(), ScanError> {
                found.push(spec.map(|s| serde_json::from_slice(s).unwrap()));
                Ok(())
            }).unwrap();
            let expected: Vec<Option<Value>> = items.iter().map(|i| i.get("spec").cloned()).collect();
            prop_assert_eq!(found, expected);
        }

        #[test]
        fn truncated_lists_are_errors(items in prop::collection::vec(item(), 1..4), cut in 1usize..64) {
            let text = serde_json::to_string(&serde_json::json!({"items": items})).unwrap();
            let end = text.len().saturating_sub(cut);
            prop_assume!(text.is_char_boundary(end));
            let r = for_each_item_spec(&text.as_bytes()[..end], |_| -> Result<(), ScanError> { Ok(()) });
            prop_assert!(r.is_err());
        }
    }
}

#[test]
fn escaped_quotes_at_every_position_of_the_eight_byte_steps() {
    for len in 0..40 {
        for at in 0..=len {
            let mut text = "x".repeat(len);
            text.insert_str(at, "\\\"");
            let list = format!(
                r#"{{"items": [{{"metadata": {{"name": "{text}"}}, "spec": {{"n": {len}}}}}]}}"#
            );
            let mut specs = Vec::new();
            for_each_item_spec(list.as_bytes(), |spec| -> Result<(), ScanError> {
                specs.push(spec.map(|s| String::from_utf8_lossy(s).into_owned()));
                Ok(())
            })
            .unwrap();
            assert_eq!(specs, [Some(format!(r#"{{"n": {len}}}"#))], "{list}");
        }
    }
}

#[test]
fn quote_or_backslash_flags_the_first_match_exactly() {
    let lowest = |bytes: [u8; 8]| match super::quote_or_backslash(u64::from_le_bytes(bytes)) {
        0 => None,
        m => Some(m.trailing_zeros() / 8),
    };
    for at in 0..8 {
        for special in [b'"', b'\\'] {
            let mut bytes = [b'a'; 8];
            bytes[at] = special;
            // Bytes after the match that could confuse the borrow chain.
            for later in at + 1..8 {
                bytes[later] = [b'"' + 1, b'\\' + 1, 0, b'\\'][later % 4];
            }
            assert_eq!(lowest(bytes), Some(at as u32), "{bytes:?}");
        }
    }
    for byte in 0..=255u8 {
        let expected = (byte == b'"' || byte == b'\\').then_some(0);
        assert_eq!(lowest([byte; 8]), expected, "{byte}");
    }
}

#[test]
fn node_fields_are_found_beside_spec() {
    let list = br#"{"items": [{"metadata": {"labels": {"a": "{"}}, "status": {"s": 1}, "spec": [2]}, {"spec": null}]}"#;
    let mut seen = Vec::new();
    super::for_each_item(
        list,
        [b"spec", b"status"],
        |[spec, status]| -> Result<(), ScanError> {
            seen.push((spec.map(<[u8]>::to_vec), status.map(<[u8]>::to_vec)));
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(
        seen,
        [
            (Some(b"[2]".to_vec()), Some(br#"{"s": 1}"#.to_vec())),
            (Some(b"null".to_vec()), None)
        ]
    );
}

#[rstest]
#[case::middle(
    r#"{"containers":[1],"nodeName":"n1","resources":{}}"#,
    Some(r#""n1""#),
    r#"{"containers":[1],"#,
    r#","resources":{}}"#
)]
#[case::last(
    r#"{"containers":[1], "nodeName" : "n-2" }"#,
    Some(r#""n-2""#),
    r#"{"containers":[1], "#,
    " }"
)]
#[case::first(
    r#"{"nodeName":null,"a":{"nodeName":"inner"}}"#,
    Some("null"),
    "{",
    r#","a":{"nodeName":"inner"}}"#
)]
#[case::absent(
    r#"{"containers":[{"nodeName":"x"}]}"#,
    None,
    r#"{"containers":[{"nodeName":"x"}]}"#,
    ""
)]
#[case::empty("{}", None, "{}", "")]
#[case::not_an_object("null", None, "null", "")]
fn split_member_cuts_around_the_member(
    #[case] text: &str,
    #[case] value: Option<&str>,
    #[case] before: &str,
    #[case] after: &str,
) {
    let split = split_member(text.as_bytes(), b"nodeName").unwrap();
    assert_eq!(split.value, value.map(str::as_bytes));
    assert_eq!(split.before, before.as_bytes());
    assert_eq!(split.after, after.as_bytes());
}

#[test]
fn objects_that_differ_only_in_the_member_split_alike() {
    let a = split_member(br#"{"c":[{"r":1}],"nodeName":"gpu-0"}"#, b"nodeName").unwrap();
    let b = split_member(br#"{"c":[{"r":1}],"nodeName":"gpu-17"}"#, b"nodeName").unwrap();
    assert_eq!((a.before, a.after), (b.before, b.after));
    assert_ne!(a.value, b.value);
    assert_eq!(
        member(br#"{"name":"x","labels":{"name":"y"}}"#, b"name").unwrap(),
        Some(&br#""x""#[..])
    );
}

#[rstest]
#[case::truncated(r#"{"a":1,"nodeName":"#)]
#[case::bare_key(r#"{a:1}"#)]
#[case::missing_comma(r#"{"a":1 "b":2}"#)]
fn split_member_refuses_malformed_objects(#[case] text: &str) {
    assert!(
        split_member(text.as_bytes(), b"nodeName").is_err(),
        "{text}"
    );
}
