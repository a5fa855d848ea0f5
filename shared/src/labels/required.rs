//! Required labels on the pod template of a GPU workload (on the Pod itself for a bare
//! Pod; on the object for kinds whose pods inherit the object's labels, like KServe).

use super::problems::{Expected, Problem};
use super::settings::RequiredLabel;
use crate::workload::{PodTemplate, Workload, pointer_to_location};

impl RequiredLabel {
    /// What the label must hold, for messages.
    pub fn expected(&self) -> Expected {
        match (self.allowed(), self.glob()) {
            (Some(values), _) => Expected::OneOf(values.to_vec()),
            (None, Some(p)) => Expected::Pattern(p.to_string()),
            (None, None) => Expected::NonEmpty,
        }
    }

    /// True when `value` satisfies the rule (an empty value never does).
    pub fn accepts(&self, value: &str) -> bool {
        !value.is_empty()
            && self
                .allowed()
                .is_none_or(|values| values.iter().any(|v| v == value))
            && self
                .glob()
                .is_none_or(|p| crate::settings::wildcard::matches(p, value))
    }
}

/// Where the labels of `template` are written: `spec.template.metadata.labels`.
pub fn labels_location(template: &PodTemplate) -> String {
    format!("{}.labels", pointer_to_location(&template.metadata_pointer))
}

/// The required-label problems of one GPU template of `workload`.
pub fn check(template: &PodTemplate, workload: &Workload, rules: &[RequiredLabel]) -> Vec<Problem> {
    let labels_at = labels_location(template);
    // A bare Pod's (or a KServe InferenceService's) template metadata *is* the object's.
    let own_metadata = template.metadata_pointer == "/metadata";
    let mut problems = Vec::new();
    for rule in rules {
        let key = rule.key.clone();
        let value = template.meta.labels.get(&rule.key).map(String::as_str);
        match value {
            None | Some("") => {
                let on_object = workload
                    .meta
                    .labels
                    .get(&rule.key)
                    .filter(|v| !v.is_empty() && !own_metadata);
                problems.push(match on_object {
                    Some(object_value) => Problem::LabelOnObjectOnly {
                        key,
                        kind: workload.kind.clone(),
                        suggestion: if rule.accepts(object_value) {
                            object_value.clone()
                        } else {
                            rule.expected().to_string()
                        },
                        labels_at: labels_at.clone(),
                    },
                    None => Problem::MissingLabel {
                        key,
                        expected: rule.expected(),
                        labels_at: labels_at.clone(),
                        empty: value.is_some(),
                    },
                });
            }
            Some(v) => {
                if let Some(allowed) = rule.allowed()
                    && !allowed.iter().any(|a| a == v)
                {
                    problems.push(Problem::ValueNotAllowed {
                        key: key.clone(),
                        value: v.to_string(),
                        allowed: allowed.to_vec(),
                        did_you_mean: allowed.iter().find(|a| a.eq_ignore_ascii_case(v)).cloned(),
                        labels_at: labels_at.clone(),
                    });
                }
                if let Some(pattern) = rule.glob()
                    && !crate::settings::wildcard::matches(pattern, v)
                {
                    problems.push(Problem::PatternMismatch {
                        key,
                        value: v.to_string(),
                        pattern: pattern.to_string(),
                        labels_at: labels_at.clone(),
                    });
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::presets;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn rules() -> Vec<RequiredLabel> {
        vec![
            RequiredLabel::one_of("workload-type", &["interactive", "batch", "training"]),
            RequiredLabel::present("team"),
            RequiredLabel::matching("cost-center", "cc-????"),
        ]
    }

    fn deployment(object_labels: Value, template_labels: Value) -> Workload {
        Workload::from_object(
            &json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d", "labels": object_labels},
                "spec": {"template": {"metadata": {"labels": template_labels}, "spec": {"containers": []}}}}),
            &[],
        )
        .unwrap()
    }

    fn problems(w: &Workload) -> Vec<Problem> {
        check(&w.templates[0], w, &rules())
    }

    const AT: &str = "spec.template.metadata.labels";

    #[test]
    fn all_present_and_valid() {
        let w = deployment(
            json!({}),
            json!({"workload-type": "batch", "team": "ml", "cost-center": "cc-0042"}),
        );
        assert_eq!(problems(&w), vec![]);
    }

    #[test]
    fn every_missing_label_is_listed_with_what_it_may_hold() {
        let w = deployment(json!({}), json!({}));
        assert_eq!(
            problems(&w),
            vec![
                Problem::MissingLabel {
                    key: "workload-type".into(),
                    expected: Expected::OneOf(vec![
                        "interactive".into(),
                        "batch".into(),
                        "training".into()
                    ]),
                    labels_at: AT.into(),
                    empty: false
                },
                Problem::MissingLabel {
                    key: "team".into(),
                    expected: Expected::NonEmpty,
                    labels_at: AT.into(),
                    empty: false
                },
                Problem::MissingLabel {
                    key: "cost-center".into(),
                    expected: Expected::Pattern("cc-????".into()),
                    labels_at: AT.into(),
                    empty: false
                },
            ]
        );
    }

    #[rstest]
    #[case::not_allowed(json!({"workload-type": "inference"}), Problem::ValueNotAllowed {
        key: "workload-type".into(), value: "inference".into(),
        allowed: vec!["interactive".into(), "batch".into(), "training".into()],
        did_you_mean: None, labels_at: AT.into() })]
    #[case::wrong_case(json!({"workload-type": "Training"}), Problem::ValueNotAllowed {
        key: "workload-type".into(), value: "Training".into(),
        allowed: vec!["interactive".into(), "batch".into(), "training".into()],
        did_you_mean: Some("training".into()), labels_at: AT.into() })]
    #[case::empty(json!({"team": ""}), Problem::MissingLabel {
        key: "team".into(), expected: Expected::NonEmpty, labels_at: AT.into(), empty: true })]
    #[case::pattern(json!({"cost-center": "cc-42"}), Problem::PatternMismatch {
        key: "cost-center".into(), value: "cc-42".into(), pattern: "cc-????".into(), labels_at: AT.into() })]
    fn one_bad_label(#[case] bad: Value, #[case] expected: Problem) {
        let mut labels = json!({"workload-type": "batch", "team": "ml", "cost-center": "cc-0042"});
        for (k, v) in bad.as_object().unwrap() {
            labels[k] = v.clone();
        }
        let w = deployment(json!({}), labels);
        assert_eq!(problems(&w), vec![expected]);
    }

    #[test]
    fn label_on_the_controller_but_not_the_template_says_where_to_put_it() {
        let w = deployment(
            json!({"team": "ml", "workload-type": "inference"}),
            json!({"cost-center": "cc-0042"}),
        );
        let p = problems(&w);
        assert_eq!(
            p,
            vec![
                Problem::LabelOnObjectOnly {
                    key: "workload-type".into(),
                    kind: "Deployment".into(),
                    // The object's value is not allowed: suggest the allowed ones instead.
                    suggestion: "<one of interactive, batch, training>".into(),
                    labels_at: AT.into()
                },
                Problem::LabelOnObjectOnly {
                    key: "team".into(),
                    kind: "Deployment".into(),
                    suggestion: "ml".into(),
                    labels_at: AT.into()
                },
            ]
        );
    }

    #[test]
    fn bare_pod_labels_are_its_own() {
        let pod = Workload::from_object(
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"team": "ml"}}, "spec": {}}),
            &[],
        )
        .unwrap();
        let p = check(
            &pod.templates[0],
            &pod,
            &[RequiredLabel::present("workload-type")],
        );
        assert_eq!(
            p,
            vec![Problem::MissingLabel {
                key: "workload-type".into(),
                expected: Expected::NonEmpty,
                labels_at: "metadata.labels".into(),
                empty: false
            }]
        );
    }

    #[test]
    fn kserve_pods_inherit_the_object_labels() {
        let isvc = Workload::from_object(
            &json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                "metadata": {"labels": {"team": "ml"}},
                "spec": {"predictor": {"containers": []}}}),
            &presets::all(),
        )
        .unwrap();
        let t = &isvc.templates[0];
        assert!(check(t, &isvc, &[RequiredLabel::present("team")]).is_empty());
        assert_eq!(
            check(t, &isvc, &[RequiredLabel::present("owner")]),
            vec![Problem::MissingLabel {
                key: "owner".into(),
                expected: Expected::NonEmpty,
                labels_at: "metadata.labels".into(),
                empty: false
            }]
        );
    }

    #[test]
    fn cronjob_labels_live_in_the_job_template() {
        let cj = Workload::from_object(
            &json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {},
                "spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}}),
            &[],
        )
        .unwrap();
        assert_eq!(
            labels_location(&cj.templates[0]),
            "spec.jobTemplate.spec.template.metadata.labels"
        );
    }

    #[rstest]
    #[case::any_non_empty(RequiredLabel::present("k"), "x", true)]
    #[case::empty_never(RequiredLabel::present("k"), "", false)]
    #[case::listed(RequiredLabel::one_of("k", &["a", "b"]), "b", true)]
    #[case::unlisted(RequiredLabel::one_of("k", &["a", "b"]), "c", false)]
    #[case::pattern(RequiredLabel::matching("k", "t-*"), "t-1", true)]
    #[case::pattern_miss(RequiredLabel::matching("k", "t-*"), "x-1", false)]
    fn accepts(#[case] rule: RequiredLabel, #[case] value: &str, #[case] ok: bool) {
        assert_eq!(rule.accepts(value), ok);
    }
}
