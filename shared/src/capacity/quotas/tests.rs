//! Scope matching as Kubernetes decides it, and the room sentence.

use super::*;
use crate::capacity::pool_quotas::ScopeRequirement;
use rstest::rstest;

fn facts(class: Option<&str>) -> ScopeFacts {
    ScopeFacts {
        priority_class: class.map(str::to_string),
        terminating: false,
        best_effort: Some(false),
        cross_namespace_affinity: Some(false),
    }
}

fn selector(scope: &str, operator: &str, values: &[&str]) -> Quota {
    Quota {
        name: "q".into(),
        scope_selector: Some(vec![ScopeRequirement {
            scope_name: scope.into(),
            operator: operator.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }]),
        ..Quota::default()
    }
}

fn scopes(list: &[&str]) -> Quota {
    Quota {
        name: "q".into(),
        scopes: list.iter().map(|s| s.to_string()).collect(),
        ..Quota::default()
    }
}

#[rstest]
#[case::in_matches(selector("PriorityClass", "In", &["high", "mid"]), Some("high"), true)]
#[case::in_other(selector("PriorityClass", "In", &["high"]), Some("low"), false)]
#[case::in_no_class(selector("PriorityClass", "In", &["high"]), None, false)]
#[case::not_in_other(selector("PriorityClass", "NotIn", &["high"]), Some("low"), true)]
#[case::not_in_listed(selector("PriorityClass", "NotIn", &["high"]), Some("high"), false)]
#[case::not_in_no_class(selector("PriorityClass", "NotIn", &["high"]), None, true)]
#[case::exists(selector("PriorityClass", "Exists", &[]), Some("low"), true)]
#[case::exists_no_class(selector("PriorityClass", "Exists", &[]), None, false)]
#[case::does_not_exist(selector("PriorityClass", "DoesNotExist", &[]), None, true)]
#[case::does_not_exist_class(selector("PriorityClass", "DoesNotExist", &[]), Some("low"), false)]
#[case::scopes_priority_class(scopes(&["PriorityClass"]), Some("low"), true)]
#[case::unscoped(Quota::default(), None, true)]
#[case::not_terminating(scopes(&["NotTerminating"]), None, true)]
#[case::terminating(scopes(&["Terminating"]), None, false)]
#[case::not_best_effort(scopes(&["NotBestEffort"]), None, true)]
#[case::best_effort(scopes(&["BestEffort"]), None, false)]
#[case::volume_attributes_class(scopes(&["VolumeAttributesClass"]), None, false)]
#[case::unknown_operator(selector("PriorityClass", "Gt", &["1"]), Some("high"), false)]
#[case::all_must_hold(Quota { scopes: vec!["NotTerminating".into()], ..selector("PriorityClass", "In", &["high"]) }, Some("low"), false)]
fn scopes_count_pods_as_kubernetes_does(
    #[case] quota: Quota,
    #[case] class: Option<&str>,
    #[case] counted: bool,
) {
    let m = scope_match(&quota, &facts(class));
    assert_eq!(m == ScopeMatch::Yes, counted, "{m:?}");
}

#[test]
fn what_the_template_cannot_tell_is_counted_and_said() {
    let unknown = ScopeFacts {
        best_effort: None,
        cross_namespace_affinity: None,
        ..ScopeFacts::default()
    };
    assert_eq!(
        scope_match(&scopes(&["NotBestEffort"]), &unknown),
        ScopeMatch::Assumed("scope NotBestEffort: the pod template sets no cpu or memory, so its pods are BestEffort unless a LimitRange gives them defaults".into())
    );
    assert!(matches!(
        scope_match(&scopes(&["CrossNamespacePodAffinity"]), &unknown),
        ScopeMatch::Assumed(_)
    ));
    // What is known decides.
    let known = ScopeFacts {
        terminating: true,
        cross_namespace_affinity: Some(true),
        ..facts(None)
    };
    assert_eq!(
        scope_match(
            &scopes(&["Terminating", "CrossNamespacePodAffinity"]),
            &known
        ),
        ScopeMatch::Yes
    );
    assert_eq!(
        scope_match(&scopes(&["NotTerminating"]), &known),
        ScopeMatch::No
    );
}

#[rstest]
#[case::some_fit(&[("nvidia.com/gpu", 8)], &[("nvidia.com/gpu", 4)], "2 of the 4 incoming replicas (2 nvidia.com/gpu each) fit")]
#[case::one_fits(&[("nvidia.com/gpu", 8)], &[("nvidia.com/gpu", 3)], "1 of the 4 incoming replicas (2 nvidia.com/gpu each) fits")]
#[case::none_fit(&[("nvidia.com/gpu", 8)], &[("nvidia.com/gpu", 1)], "none of the 4 incoming replicas (2 nvidia.com/gpu each) fit")]
#[case::one_replica(&[("nvidia.com/gpu", 2)], &[], "none of the 1 incoming replica (2 nvidia.com/gpu each) fit")]
fn the_room_is_told_in_replicas(
    #[case] incoming: &[(&str, u64)],
    #[case] room: &[(&str, u64)],
    #[case] text: &str,
) {
    let counts =
        |l: &[(&str, u64)]| -> GpuCounts { l.iter().map(|(r, n)| (r.to_string(), *n)).collect() };
    let shape = counts(&[("nvidia.com/gpu", 2)]);
    assert_eq!(
        room_sentence(
            &counts(incoming),
            &counts(room),
            Some(&shape),
            "nvidia.com/gpu"
        ),
        text
    );
    assert_eq!(
        room_sentence(&counts(incoming), &counts(room), None, "nvidia.com/gpu"),
        format!(
            "room for {} more nvidia.com/gpu",
            counts(room).get("nvidia.com/gpu").copied().unwrap_or(0)
        )
    );
}
