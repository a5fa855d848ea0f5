//! How a GPU pod asks for its GPUs: limits, requests equal to limits, whole numbers,
//! per-container and per-pod maximums, cpu and memory requests next to the GPUs.
//!
//! Every container counts, whatever its role: app containers, init containers,
//! sidecars (restartable init containers), ephemeral containers and pod-level
//! `spec.resources`; the pod's total is Kubernetes' effective request.

use super::problems::Problem;
use super::settings::Settings;
use crate::gpu::{ContainerRole, GpuProblem, PodGpus, describe};
use crate::podspec::PodSpec;
use crate::quantity::{Quantity, QuantityError};

/// The name `gpu::pod_gpus` gives pod-level `spec.resources` in its problems.
const POD_LEVEL: &str = "(pod-level resources)";

/// How a container is named in messages: `init container 'warmup'`.
pub fn who(spec: &PodSpec, name: &str) -> String {
    if name == POD_LEVEL {
        return "the pod-level resources (spec.resources)".into();
    }
    let role = if spec.containers.iter().any(|c| c.name == name) {
        ContainerRole::App
    } else if let Some(c) = spec.init_containers.iter().find(|c| c.name == name) {
        if c.restart_policy.as_deref() == Some("Always") {
            ContainerRole::Sidecar
        } else {
            ContainerRole::Init
        }
    } else if spec.ephemeral_containers.iter().any(|c| c.name == name) {
        ContainerRole::Ephemeral
    } else {
        ContainerRole::App
    };
    format!("{role} '{name}'")
}

/// The request problems of one GPU pod (template).
pub fn check(spec: &PodSpec, gpus: &PodGpus, settings: &Settings) -> Vec<Problem> {
    let mut problems = Vec::new();
    for p in &gpus.problems {
        match p {
            GpuProblem::RequestWithoutLimit {
                container,
                resource,
                request,
            } if settings.require_gpu_limits => problems.push(Problem::RequestWithoutLimit {
                who: who(spec, container),
                resource: resource.clone(),
                request: request.clone(),
            }),
            GpuProblem::RequestNotEqualLimit {
                container,
                resource,
                request,
                limit,
            } if settings.require_requests_equal_limits => {
                problems.push(Problem::RequestNotEqualLimit {
                    who: who(spec, container),
                    resource: resource.clone(),
                    request: request.clone(),
                    limit: limit.clone(),
                })
            }
            GpuProblem::Invalid {
                container,
                resource,
                error: QuantityError::NotWhole(value),
            } if settings.require_whole_gpus => problems.push(Problem::FractionalGpu {
                who: who(spec, container),
                resource: resource.clone(),
                value: value.clone(),
                rounded: Quantity::parse(value).map(|q| q.units_ceil()).unwrap_or(1),
            }),
            // A fraction with requireWholeGpus off: counted rounded up, allowed.
            GpuProblem::Invalid {
                error: QuantityError::NotWhole(_),
                ..
            } => {}
            // Negative, unreadable or absurd: nothing sensible to count, so always denied.
            GpuProblem::Invalid {
                container,
                resource,
                error,
            } => problems.push(Problem::InvalidGpuQuantity {
                who: who(spec, container),
                resource: resource.clone(),
                error: error.to_string(),
            }),
            // A claim or share whose GPUs cannot be counted: always denied (fail closed).
            GpuProblem::Claim { .. } | GpuProblem::Share(_) => {
                problems.push(Problem::UncountableGpus {
                    detail: p.to_string(),
                })
            }
            _ => {}
        }
    }

    for c in &gpus.containers {
        let who = format!("{} '{}'", c.role, c.name);
        if c.role == ContainerRole::Ephemeral {
            problems.push(Problem::GpuInEphemeralContainer {
                who: who.clone(),
                gpus: describe(&c.gpus),
            });
        }
        if let Some(max) = settings.max_gpus_per_container
            && c.total() > max
        {
            problems.push(Problem::TooManyGpusInContainer {
                who: who.clone(),
                total: c.total(),
                gpus: describe(&c.gpus),
                max,
            });
        }
    }

    if let Some(max) = settings.max_gpus_per_pod
        && gpus.total() > max
    {
        problems.push(Problem::TooManyGpusInPod {
            total: gpus.total(),
            gpus: describe(&gpus.effective),
            max,
        });
    }

    if settings.require_cpu_and_memory_requests {
        let pod_level = spec.resources.as_ref();
        let pod_has = |r: &str| {
            pod_level.is_some_and(|p| p.requests.contains_key(r) || p.limits.contains_key(r))
        };
        for c in gpus
            .containers
            .iter()
            .filter(|c| c.role != ContainerRole::Ephemeral)
        {
            let cpu = !c.has_cpu_request && !pod_has("cpu");
            let memory = !c.has_memory_request && !pod_has("memory");
            if cpu || memory {
                problems.push(Problem::NoCpuOrMemoryRequest {
                    who: format!("{} '{}'", c.role, c.name),
                    cpu,
                    memory,
                });
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::{GpuResources, pod_gpus};
    use rstest::rstest;
    use serde_json::{Value, json};

    const SIZED: &str = r#"{"cpu": "4", "memory": "16Gi"}"#;

    fn sized() -> Value {
        serde_json::from_str(SIZED).unwrap()
    }

    fn run(spec: Value, settings: &Settings) -> Vec<Problem> {
        let spec: PodSpec = serde_json::from_value(spec).unwrap();
        let extra = ["example.com/tpu".to_string()];
        let gpus = pod_gpus(&spec, &GpuResources::new(&extra));
        check(&spec, &gpus, settings)
    }

    fn container(name: &str, limits: Value, requests: Value) -> Value {
        json!({"name": name, "resources": {"limits": limits, "requests": requests}})
    }

    fn gpu_limit(n: &str) -> Value {
        let mut l = sized();
        l["nvidia.com/gpu"] = json!(n);
        l
    }

    #[test]
    fn a_well_formed_gpu_pod_has_no_problems() {
        let spec = json!({"containers": [container("app", gpu_limit("2"), sized())]});
        assert_eq!(run(spec, &Settings::default()), vec![]);
    }

    #[rstest]
    #[case::request_without_limit(
        json!({"containers": [container("app", sized(), json!({"nvidia.com/gpu": "2"}))]}),
        Problem::RequestWithoutLimit { who: "container 'app'".into(), resource: "nvidia.com/gpu".into(), request: "2".into() })]
    #[case::request_not_equal(
        json!({"containers": [container("app", gpu_limit("1"), json!({"nvidia.com/gpu": "4"}))]}),
        Problem::RequestNotEqualLimit { who: "container 'app'".into(), resource: "nvidia.com/gpu".into(), request: "4".into(), limit: "1".into() })]
    #[case::fraction(
        json!({"containers": [container("app", gpu_limit("0.5"), json!({}))]}),
        Problem::FractionalGpu { who: "container 'app'".into(), resource: "nvidia.com/gpu".into(), value: "0.5".into(), rounded: 1 })]
    #[case::milli_in_init(
        json!({"containers": [container("app", sized(), json!({}))], "initContainers": [container("warmup", json!({"cpu": "1", "memory": "1Gi", "amd.com/gpu": "1500m"}), json!({}))]}),
        Problem::FractionalGpu { who: "init container 'warmup'".into(), resource: "amd.com/gpu".into(), value: "1500m".into(), rounded: 2 })]
    #[case::negative(
        json!({"containers": [container("app", gpu_limit("-1"), json!({}))]}),
        Problem::InvalidGpuQuantity { who: "container 'app'".into(), resource: "nvidia.com/gpu".into(), error: "'-1' must not be negative".into() })]
    #[case::garbage_in_sidecar(
        json!({"containers": [container("app", sized(), json!({}))], "initContainers": [{"name": "proxy", "restartPolicy": "Always", "resources": {"limits": {"example.com/tpu": "lots"}}}]}),
        Problem::InvalidGpuQuantity { who: "sidecar container 'proxy'".into(), resource: "example.com/tpu".into(), error: "'lots' is not a Kubernetes quantity (expected e.g. 1, 500m, 16Gi, 1e3)".into() })]
    #[case::pod_level_request_only(
        json!({"containers": [container("app", sized(), json!({}))], "resources": {"requests": {"nvidia.com/gpu": "1"}}}),
        Problem::RequestWithoutLimit { who: "the pod-level resources (spec.resources)".into(), resource: "nvidia.com/gpu".into(), request: "1".into() })]
    #[case::no_cpu_no_memory(
        json!({"containers": [container("app", json!({"nvidia.com/mig-3g.40gb": "1"}), json!({}))]}),
        Problem::NoCpuOrMemoryRequest { who: "container 'app'".into(), cpu: true, memory: true })]
    #[case::no_memory_in_init(
        json!({"containers": [container("app", sized(), json!({}))], "initContainers": [container("warmup", json!({"nvidia.com/gpu": "1"}), json!({"cpu": "1"}))]}),
        Problem::NoCpuOrMemoryRequest { who: "init container 'warmup'".into(), cpu: false, memory: true })]
    fn each_mistake_alone(#[case] spec: Value, #[case] expected: Problem) {
        assert_eq!(run(spec, &Settings::default()), vec![expected]);
    }

    #[test]
    fn ephemeral_gpus_are_denied_and_counted() {
        let spec = json!({
            "containers": [container("app", gpu_limit("1"), json!({}))],
            "ephemeralContainers": [container("debug", json!({"nvidia.com/gpu": "1"}), json!({}))]
        });
        let settings = Settings {
            max_gpus_per_pod: Some(1),
            ..Settings::default()
        };
        assert_eq!(
            run(spec, &settings),
            vec![
                Problem::GpuInEphemeralContainer {
                    who: "ephemeral container 'debug'".into(),
                    gpus: "nvidia.com/gpu: 1".into()
                },
                Problem::TooManyGpusInPod {
                    total: 2,
                    gpus: "nvidia.com/gpu: 2".into(),
                    max: 1
                },
            ]
        );
    }

    #[rstest]
    #[case::limits(Settings { require_gpu_limits: false, ..Settings::default() },
        json!({"containers": [container("app", sized(), json!({"nvidia.com/gpu": "2"}))]}))]
    #[case::equal(Settings { require_requests_equal_limits: false, ..Settings::default() },
        json!({"containers": [container("app", gpu_limit("1"), json!({"nvidia.com/gpu": "2"}))]}))]
    #[case::whole(Settings { require_whole_gpus: false, ..Settings::default() },
        json!({"containers": [container("app", gpu_limit("0.5"), json!({}))]}))]
    #[case::cpu_memory(Settings { require_cpu_and_memory_requests: false, ..Settings::default() },
        json!({"containers": [container("app", json!({"nvidia.com/gpu": "1"}), json!({}))]}))]
    fn each_toggle_turns_its_rule_off(#[case] settings: Settings, #[case] spec: Value) {
        assert!(!run(spec.clone(), &Settings::default()).is_empty());
        assert_eq!(run(spec, &settings), vec![]);
    }

    #[test]
    fn invalid_quantities_are_denied_even_with_whole_gpus_off() {
        let settings = Settings {
            require_whole_gpus: false,
            ..Settings::default()
        };
        let spec = json!({"containers": [container("app", gpu_limit("many"), json!({}))]});
        assert!(matches!(
            run(spec, &settings).as_slice(),
            [Problem::InvalidGpuQuantity { .. }]
        ));
    }

    #[rstest]
    #[case::at_limit("4", None)]
    #[case::above("5", Some(5))]
    fn max_per_container(#[case] n: &str, #[case] over: Option<u64>) {
        let settings = Settings {
            max_gpus_per_container: Some(4),
            ..Settings::default()
        };
        let spec = json!({"containers": [container("app", gpu_limit(n), json!({}))]});
        let expected: Vec<Problem> = over
            .map(|total| Problem::TooManyGpusInContainer {
                who: "container 'app'".into(),
                total,
                gpus: format!("nvidia.com/gpu: {total}"),
                max: 4,
            })
            .into_iter()
            .collect();
        assert_eq!(run(spec, &settings), expected);
    }

    #[test]
    fn max_per_pod_counts_every_gpu_kind_and_init_containers() {
        let settings = Settings {
            max_gpus_per_pod: Some(4),
            ..Settings::default()
        };
        let mut mixed = gpu_limit("2");
        mixed["amd.com/gpu"] = json!("2");
        let at_limit = json!({"containers": [container("app", mixed, json!({}))]});
        assert_eq!(run(at_limit, &settings), vec![]);
        let hidden_in_init = json!({
            "containers": [container("app", gpu_limit("1"), json!({}))],
            "initContainers": [container("warmup", gpu_limit("8"), json!({}))]
        });
        assert_eq!(
            run(hidden_in_init, &settings),
            vec![Problem::TooManyGpusInPod {
                total: 8,
                gpus: "nvidia.com/gpu: 8".into(),
                max: 4
            }]
        );
    }

    #[test]
    fn pod_level_cpu_and_memory_satisfy_the_request_rule() {
        let spec = json!({
            "containers": [container("app", json!({"nvidia.com/gpu": "1"}), json!({}))],
            "resources": {"requests": {"cpu": "8", "memory": "64Gi"}}
        });
        assert_eq!(run(spec, &Settings::default()), vec![]);
    }

    #[test]
    fn cpu_and_memory_are_only_required_next_to_gpus() {
        let spec = json!({"containers": [
            container("app", gpu_limit("1"), json!({})),
            {"name": "logger"}
        ]});
        assert_eq!(run(spec, &Settings::default()), vec![]);
    }
}
