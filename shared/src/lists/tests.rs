use super::*;
use rstest::rstest;

/// The raw values the reader finds at `paths`, per item, as strings (`-` where none).
fn found<const N: usize>(text: &str, paths: [&[&str]; N]) -> Result<Vec<[String; N]>, String> {
    let mut out = Vec::new();
    for_each_item(
        text.as_bytes(),
        paths,
        |values| -> Result<(), serde_json::Error> {
            out.push(values.map(|v| v.map_or("-".to_string(), |v| v.get().to_string())));
            Ok(())
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(out)
}

/// The specs the reader finds.
fn specs(text: &str) -> Result<Vec<String>, String> {
    Ok(found(text, [&["spec"]])?.into_iter().map(|[s]| s).collect())
}

#[rstest]
#[case::plain(r#"{"items": [{"spec": {"a": 1}}]}"#, &[r#"{"a": 1}"#])]
#[case::metadata_first(r#"{"kind":"PodList","items":[{"metadata":{"name":"p","labels":{"a":"}{]["}},"spec":{"x":[1,{"y":"\"}"}]},"status":{}}]}"#, &[r#"{"x":[1,{"y":"\"}"}]}"#])]
#[case::items_last(r#"{"metadata": {"resourceVersion": "1", "x": [{"items": [1]}]}, "items": [{"spec": null}, {}]}"#, &["-", "-"])]
#[case::whitespace(" {\n \"items\" : [ { \"spec\" : { } } , { \"metadata\" : { } } ] } \n", &["{ }", "-"])]
#[case::scalars(r#"{"items": [{"a": true, "b": -1.5e3, "c": null, "spec": "text", "d": false}]}"#, &[r#""text""#])]
#[case::escaped_backslash(r#"{"items": [{"metadata": {"a": "\\"}, "spec": {}}]}"#, &["{}"])]
#[case::unicode(r#"{"items": [{"metadata": {"a": "é ☃ \u00e9"}, "spec": {"é": 1}}]}"#, &[r#"{"é": 1}"#])]
#[case::escaped_key(r#"{"items": [{"sp\u0065c": 1}]}"#, &["1"])]
#[case::repeated_last_wins(r#"{"items": [{"spec": 1, "spec": 2}]}"#, &["2"])]
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
#[case::item_an_array(r#"{"items": [[{"spec": 1}]]}"#)]
#[case::item_null(r#"{"items": [null]}"#)]
#[case::items_not_a_list(r#"{"items": 5}"#)]
#[case::missing_colon(r#"{"items" [{}]}"#)]
#[case::missing_comma(r#"{"items": [{} {}]}"#)]
#[case::trailing(r#"{"items": []} x"#)]
#[case::two_documents(r#"{} {}"#)]
#[case::bare_key(r#"{items: []}"#)]
#[case::missing_value(r#"{"items": [{"spec": }]}"#)]
#[case::bad_number_in_skipped_metadata(r#"{"items": [{"metadata": {"a": 1x}, "spec": {}}]}"#)]
#[case::bare_word_in_skipped_metadata(r#"{"items": [{"metadata": {"a": nope}, "spec": {}}]}"#)]
fn malformed_lists_are_errors(#[case] text: &str) {
    assert!(specs(text).is_err(), "{text}");
}

#[test]
fn errors_say_where() {
    assert_eq!(
        specs(r#"{"items": 5}"#).unwrap_err(),
        "invalid type: integer `5`, expected an array of items at line 1 column 11"
    );
}

#[test]
fn callback_errors_stop_the_reading() {
    #[derive(Debug)]
    enum Stop {
        Here,
        Json,
    }
    impl From<serde_json::Error> for Stop {
        fn from(_: serde_json::Error) -> Self {
            Stop::Json
        }
    }
    let mut seen = 0;
    let r = for_each_item(br#"{"items": [{}, {}, {}]}"#, [&["spec"]], |_| {
        seen += 1;
        if seen == 2 { Err(Stop::Here) } else { Ok(()) }
    });
    assert!(matches!(r, Err(Stop::Here)), "{r:?}");
    assert_eq!(seen, 2);
}

#[test]
fn node_fields_are_found_beside_spec() {
    let list = r#"{"items": [{"metadata": {"labels": {"a": "{"}, "name": "n-1"}, "status": {"s": 1}, "spec": [2]}, {"spec": null, "metadata": null}]}"#;
    assert_eq!(
        found(list, [&["metadata", "name"], &["spec"], &["status"]]).unwrap(),
        [
            [r#""n-1""#, "[2]", r#"{"s": 1}"#].map(String::from),
            ["-", "-", "-"].map(String::from)
        ]
    );
}

#[test]
fn paths_reach_into_nested_objects_only_along_their_names() {
    let list = r#"{"items": [
        {"spec": {"containers": [{"nodeName": "x"}], "nodeName": "n1", "resources": {}},
         "metadata": {"name": "p", "labels": {"pool": "a100", "team": "ml"}}},
        {"spec": {"nodeName": null}, "metadata": {"labels": null}},
        {"spec": {}, "metadata": {"labels": {"pool": "h\u0031" }}}
    ]}"#;
    let paths: [&[&str]; 4] = [
        &["spec", "nodeName"],
        &["spec", "containers"],
        &["metadata", "labels", "pool"],
        &["metadata", "name"],
    ];
    assert_eq!(
        found(list, paths).unwrap(),
        [
            [r#""n1""#, r#"[{"nodeName": "x"}]"#, r#""a100""#, r#""p""#].map(String::from),
            ["-", "-", "-", "-"].map(String::from),
            ["-", "-", r#""h\u0031""#, "-"].map(String::from),
        ]
    );
}

#[test]
fn a_repeated_object_on_a_path_replaces_what_the_first_gave() {
    let list = r#"{"items": [{"metadata": {"name": "a"}, "metadata": {"uid": "1"}}]}"#;
    assert_eq!(
        found(list, [&["metadata", "name"]]).unwrap(),
        [["-".to_string()]]
    );
}

#[rstest]
#[case::string(r#"{"items": [{"spec": "text"}]}"#)]
#[case::array(r#"{"items": [{"spec": [{"nodeName": "n"}]}]}"#)]
#[case::number(r#"{"items": [{"spec": 1}]}"#)]
fn a_value_on_a_path_that_is_not_an_object_is_an_error(#[case] text: &str) {
    let e = found(text, [&["spec", "nodeName"]]).unwrap_err();
    assert!(e.contains("expected an object"), "{e}");
}

#[test]
fn escaped_quotes_at_every_position_of_an_eight_byte_step() {
    for len in 0..40 {
        for at in 0..=len {
            let mut text = "x".repeat(len);
            text.insert_str(at, "\\\"");
            let list = format!(
                r#"{{"items": [{{"metadata": {{"name": "{text}"}}, "spec": {{"n": {len}}}}}]}}"#
            );
            assert_eq!(
                found(&list, [&["spec"], &["metadata", "name"]]).unwrap(),
                [[format!(r#"{{"n": {len}}}"#), format!(r#""{text}""#)]],
                "{list}"
            );
        }
    }
}

/// The reader agrees with serde_json on arbitrary JSON lists.
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
                prop::collection::btree_map("[a-z\"\\\\{}]{0,6}|spec|items|name", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn item() -> impl Strategy<Value = Value> {
        prop::collection::btree_map("[a-z]{1,8}|spec|metadata|status", json(), 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    fn text(list: &Value, pretty: bool) -> String {
        if pretty {
            serde_json::to_string_pretty(list)
        } else {
            serde_json::to_string(list)
        }
        .unwrap()
    }

    /// What `values` hold, parsed.
    fn parsed<const N: usize>(
        text: &str,
        paths: [&[&str]; N],
    ) -> Result<Vec<[Option<Value>; N]>, serde_json::Error> {
        let mut found = Vec::new();
        for_each_item(
            text.as_bytes(),
            paths,
            |values| -> Result<(), serde_json::Error> {
                found.push(values.map(|v| v.map(|v| serde_json::from_str(v.get()).unwrap())));
                Ok(())
            },
        )?;
        Ok(found)
    }

    fn non_null(v: Option<&Value>) -> Option<Value> {
        v.filter(|v| !v.is_null()).cloned()
    }

    proptest! {
        #[test]
        fn agrees_with_serde_json(items in prop::collection::vec(item(), 0..6), extra in json(), pretty in any::<bool>()) {
            let list = serde_json::json!({"kind": "PodList", "metadata": extra, "items": items});
            let found = parsed(&text(&list, pretty), [&["spec"], &["status"]]).unwrap();
            let expected: Vec<[Option<Value>; 2]> = items
                .iter()
                .map(|i| [non_null(i.get("spec")), non_null(i.get("status"))])
                .collect();
            prop_assert_eq!(found, expected);
        }

        #[test]
        fn nested_paths_agree_with_serde_json(items in prop::collection::vec(item(), 0..6), pretty in any::<bool>()) {
            let list = serde_json::json!({"items": items});
            let found = parsed(&text(&list, pretty), [&["metadata", "name"]]);
            let walkable = items.iter().all(|i| i.get("metadata").is_none_or(|m| m.is_object() || m.is_null()));
            prop_assert_eq!(found.is_ok(), walkable);
            if let Ok(found) = found {
                let expected: Vec<[Option<Value>; 1]> = items
                    .iter()
                    .map(|i| [non_null(i.get("metadata").and_then(|m| m.get("name")))])
                    .collect();
                prop_assert_eq!(found, expected);
            }
        }

        #[test]
        fn truncated_lists_are_errors(items in prop::collection::vec(item(), 1..4), cut in 1usize..64) {
            let text = serde_json::to_string(&serde_json::json!({"items": items})).unwrap();
            let end = text.len().saturating_sub(cut);
            prop_assume!(text.is_char_boundary(end));
            prop_assert!(parsed(&text[..end], [&["spec"]]).is_err());
        }
    }
}
