use super::*;
use serde_json::json;

// 2026-12-01T00:00:00Z
const NOW: UnixSeconds = 1_796_083_200;
const RULES: &[&str] = &["maxGpusPerPod", "requiredLabels"];

fn exception(v: serde_json::Value) -> Exception {
    let mut base = json!({"name": "big", "namespaces": ["ml-a"], "owner": "alice",
                          "reason": "quarterly run", "expires": "2026-12-31"});
    for (k, x) in v.as_object().unwrap() {
        base[k] = x.clone();
    }
    serde_json::from_value(base).unwrap()
}

fn check(list: Vec<Exception>) -> Result<Exceptions, FieldError> {
    Exceptions::check(&list, DEFAULT_MAX_DAYS, RULES, NOW, "exceptions")
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn now_is_what_the_tests_say() {
    assert_eq!(rfc3339(NOW), "2026-12-01T00:00:00Z");
}

#[test]
fn a_valid_exception_applies_with_its_audit() {
    let e = check(vec![exception(json!({}))]).unwrap();
    let l = labels(&[("app", "x")]);
    match e.lookup("ml-a", &[&l], "maxGpusPerPod", NOW) {
        Lookup::Applies { exception, warning } => {
            assert_eq!(
                exception.audit(),
                "exception=big owner=alice expires=2027-01-01T00:00:00Z"
            );
            assert_eq!(warning, None);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(e.lookup("ml-b", &[&l], "maxGpusPerPod", NOW), Lookup::None);
}

#[test]
fn rules_and_selectors_narrow_it() {
    let e = check(vec![exception(json!({
        "rules": ["maxGpusPerPod"], "selector": {"matchLabels": {"app": "trainer"}}
    }))])
    .unwrap();
    let trainer = labels(&[("app", "trainer")]);
    let web = labels(&[("app", "web")]);
    assert!(matches!(
        e.lookup("ml-a", &[&trainer], "maxGpusPerPod", NOW),
        Lookup::Applies { .. }
    ));
    assert_eq!(
        e.lookup("ml-a", &[&trainer], "requiredLabels", NOW),
        Lookup::None
    );
    assert_eq!(
        e.lookup("ml-a", &[&trainer, &web], "maxGpusPerPod", NOW),
        Lookup::None,
        "every template must match"
    );
    assert_eq!(e.lookup("ml-a", &[], "maxGpusPerPod", NOW), Lookup::None);
}

#[test]
fn it_warns_in_its_last_week_and_stops_at_its_end() {
    let e = check(vec![exception(json!({"expires": "2026-12-05"}))]).unwrap();
    let l = labels(&[]);
    let Lookup::Applies {
        warning: Some(w), ..
    } = e.lookup("ml-a", &[&l], "x", NOW)
    else {
        panic!()
    };
    assert_eq!(
        w,
        "exception big (owner alice) ends 2026-12-06T00:00:00Z (in 5 days); renew it or fix the workload before then"
    );
    let last = NOW + 4 * 86_400 + 86_399; // 2026-12-05T23:59:59Z
    assert!(
        matches!(e.lookup("ml-a", &[&l], "x", last), Lookup::Applies { .. }),
        "the whole last day"
    );
    let after = last + 1;
    let expired = e.lookup("ml-a", &[&l], "x", after);
    assert_eq!(
        expired.expired_note().unwrap(),
        "exception big (owner alice) expired at 2026-12-06T00:00:00Z"
    );
    let t = check(vec![exception(json!({"expires": "2026-12-01T12:00:00Z"}))]).unwrap();
    assert!(matches!(
        t.lookup("ml-a", &[&l], "x", NOW + 43_199),
        Lookup::Applies { .. }
    ));
    assert!(matches!(
        t.lookup("ml-a", &[&l], "x", NOW + 43_200),
        Lookup::Expired(_)
    ));
}

#[test]
fn a_live_exception_wins_over_an_expired_one() {
    let e = check(vec![
        exception(json!({"name": "old", "expires": "2026-11-30"})),
        exception(json!({"name": "new"})),
    ])
    .unwrap();
    let l = labels(&[]);
    let Lookup::Applies { exception, .. } = e.lookup("ml-a", &[&l], "x", NOW) else {
        panic!()
    };
    assert_eq!(exception.exception.name, "new");
}

#[test]
fn settings_mistakes_name_the_field() {
    for (e, says) in [
        (
            exception(json!({"owner": ""})),
            "exceptions[0].owner: exception 'big' has no owner",
        ),
        (
            exception(json!({"expires": ""})),
            "exceptions[0].expires: exception 'big' has no end date",
        ),
        (
            exception(json!({"expires": "soon"})),
            "exceptions[0].expires: 'soon' is not a date",
        ),
        (
            exception(json!({"expires": "2027-06-01"})),
            "exceptions[0].expires: 2027-06-01 is more than 90 days",
        ),
        (
            exception(json!({"name": ""})),
            "exceptions[0].name: give the exception a name",
        ),
        (
            exception(json!({"rules": ["everything"]})),
            "exceptions[0].rules[0]: 'everything' is not a rule of this policy; use one of maxGpusPerPod, requiredLabels",
        ),
        (
            exception(json!({"namespaces": []})),
            "exceptions[0]: exception 'big' names no namespaces and no selector",
        ),
        (
            exception(json!({"namespaces": ["Bad_NS"]})),
            "exceptions[0].namespaces[0]:",
        ),
    ] {
        let err = check(vec![e]).unwrap_err().to_string();
        assert!(err.starts_with(says), "{err}");
    }
    let twice = check(vec![exception(json!({})), exception(json!({}))])
        .unwrap_err()
        .to_string();
    assert!(
        twice.starts_with("exceptions[1].name: 'big' is used twice"),
        "{twice}"
    );
    assert!(
        Exceptions::check(&[], 0, RULES, NOW, "exceptions")
            .unwrap_err()
            .to_string()
            .starts_with("maxExceptionDays")
    );
    let longer = Exceptions::check(
        &[exception(json!({"expires": "2027-06-01"}))],
        366,
        RULES,
        NOW,
        "exceptions",
    );
    assert!(longer.is_ok());
}

/// Through a policy: routing denies a GPU workload that matches no pool.
mod through_a_policy {
    use super::*;
    use crate::clock::FixedClock;
    use crate::cluster::NoCluster;
    use crate::policy::{Policy, checked};
    use crate::routing::Settings;
    use crate::routing::policy::Routing;

    fn evaluate_at(
        request: &AdmissionRequest,
        settings: &Settings,
        cluster: &dyn crate::cluster::Cluster,
        clock: &dyn crate::clock::Clock,
    ) -> crate::admission::Verdict {
        Routing::evaluate_at(request, &checked::<Routing>(settings), cluster, clock)
    }

    fn settings(expires: &str) -> Settings {
        serde_json::from_value(json!({
            "pools": [{"name": "batch", "selector": {"matchLabels": {"workload-type": "batch"}},
                       "nodeSelector": {"pool": "batch"}}],
            "exceptions": [{"name": "lab", "namespaces": ["ml-lab"], "owner": "alice",
                            "reason": "experiments on the spare node", "expires": expires}]
        }))
        .unwrap()
    }

    fn request(namespace: &str) -> crate::admission::AdmissionRequest {
        serde_json::from_value(json!({
            "uid": "u", "operation": "CREATE", "namespace": namespace,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "x"}},
                       "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
        }))
        .unwrap()
    }

    /// A Pod in `namespace` under an exception that ends at `expires`, at [`NOW`].
    fn at_now(namespace: &str, expires: &str) -> crate::admission::Verdict {
        evaluate_at(
            &request(namespace),
            &settings(expires),
            &NoCluster,
            &FixedClock(NOW),
        )
    }

    #[test]
    fn a_denial_is_excused_with_an_audit_annotation() {
        let v = at_now("ml-lab", "2026-12-31");
        assert!(v.allowed, "{v:?}");
        assert_eq!(
            v.audit_annotations[AUDIT_KEY],
            "exception=lab owner=alice expires=2027-01-01T00:00:00Z"
        );
        assert!(v.audit_annotations[AUDIT_EXCUSED].contains("matches no GPU pool"));
        assert!(v.warnings.is_empty());
        let other = at_now("ml-prod", "2026-12-31");
        assert!(!other.allowed);
    }

    /// A clock that counts how often it is read.
    struct CountingClock(std::cell::Cell<u32>);

    impl crate::clock::Clock for CountingClock {
        fn now(&self) -> crate::clock::UnixSeconds {
            self.0.set(self.0.get() + 1);
            NOW
        }
    }

    #[test]
    fn the_clock_is_read_only_for_a_denial_an_exception_may_excuse() {
        let clock = CountingClock(std::cell::Cell::new(0));
        let batch = serde_json::from_value(json!({
            "uid": "u", "operation": "CREATE", "namespace": "ml-lab",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "object": {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "p", "labels": {"workload-type": "batch"}},
                       "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
        }))
        .unwrap();
        let routed = evaluate_at(&batch, &settings("2026-12-31"), &NoCluster, &clock);
        assert!(
            routed.allowed && routed.mutated_object.is_some(),
            "{routed:?}"
        );
        assert_eq!(clock.0.get(), 0, "an accepted request reads no clock");
        let excused = evaluate_at(
            &request("ml-lab"),
            &settings("2026-12-31"),
            &NoCluster,
            &clock,
        );
        assert!(excused.allowed, "{excused:?}");
        assert_eq!(clock.0.get(), 1, "a denial with exceptions reads it once");
    }

    #[test]
    fn near_its_end_it_warns_and_after_it_the_denial_says_it_expired() {
        let soon = at_now("ml-lab", "2026-12-03");
        assert!(soon.allowed);
        assert!(
            soon.warnings[0]
                .starts_with("exception lab (owner alice) ends 2026-12-04T00:00:00Z (in 3 days)"),
            "{:?}",
            soon.warnings
        );
        let late = at_now("ml-lab", "2026-11-20");
        assert!(!late.allowed);
        assert!(
            late.message.unwrap().ends_with("(exception lab (owner alice) expired at 2026-11-21T00:00:00Z; renew it or fix the workload)")
        );
    }
}
