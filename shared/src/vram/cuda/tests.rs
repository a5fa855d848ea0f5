use super::requirement::{Facts, Truth};
use super::*;
use crate::inventory::Version;
use serde_json::{Value, json};

const IMAGE: &str = "nvidia/cuda:12.4.1-base-ubuntu22.04";

fn container(env: Value) -> ContainerEnv {
    let c: Container =
        serde_json::from_value(json!({"name": "server", "image": IMAGE, "env": env})).unwrap();
    ContainerEnv::of(&c, "container server".into()).unwrap()
}

fn image_env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
    vars.iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// The first alternatives and sources of what `env` over `image` requires.
fn asked(image: &[(&str, &str)], env: Value) -> Result<Vec<(String, String)>, String> {
    match required(&image_env(image), &container(env))? {
        Required::All(asked) => Ok(asked
            .into_iter()
            .map(|a| (a.requirement.first(), a.source))
            .collect()),
        Required::Nothing => Ok(Vec::new()),
        Required::NotKnown => Err("not known".into()),
    }
}

fn holds_on_cuda(r: &Required, cuda: &str) -> Vec<Truth> {
    holds_on(r, cuda, None)
}

fn holds_on(r: &Required, cuda: &str, driver: Option<&str>) -> Vec<Truth> {
    let cuda = Version::parse(cuda).unwrap();
    let driver = driver.map(|d| Version::parse(d).unwrap());
    match r {
        Required::All(asked) => asked
            .iter()
            .map(|a| {
                a.requirement.holds(Facts {
                    cuda: Some(&cuda),
                    driver: driver.as_ref(),
                })
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[test]
fn the_image_requires_what_its_env_says_and_the_pod_overrides_it() {
    let image = [
        ("PATH", "/usr/bin"),
        (
            "NVIDIA_REQUIRE_CUDA",
            "cuda>=12.4 brand=tesla,driver>=535,driver<536",
        ),
        ("CUDA_VERSION", "12.4.1"),
    ];
    assert_eq!(
        asked(&image, json!([])),
        Ok(vec![(
            "cuda>=12.4".to_string(),
            "NVIDIA_REQUIRE_CUDA of the image".to_string()
        )])
    );
    // The pod's env replaces the image's value.
    assert_eq!(
        asked(
            &image,
            json!([{"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=12.0"}])
        ),
        Ok(vec![(
            "cuda>=12.0".to_string(),
            "NVIDIA_REQUIRE_CUDA in the container's env".to_string()
        )])
    );
    // The last entry of a name counts.
    assert_eq!(
        asked(
            &image,
            json!([{"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=13"},
                   {"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=11"}])
        )
        .unwrap()[0]
            .0,
        "cuda>=11"
    );
    // Every NVIDIA_REQUIRE_* variable but Jetson's must hold.
    let r = required(
        &image_env(&image),
        &container(
            json!([{"name": "NVIDIA_REQUIRE_ARCH", "value": "cuda>=12.6"},
                          {"name": "NVIDIA_REQUIRE_JETPACK", "value": "nonsense"}]),
        ),
    )
    .unwrap();
    assert_eq!(holds_on_cuda(&r, "12.4"), vec![Truth::Yes, Truth::No]);
}

#[test]
fn disable_require_turns_the_check_off_as_go_reads_a_boolean() {
    let image = [("NVIDIA_REQUIRE_CUDA", "cuda>=12.4")];
    for on in ["1", "t", "T", "true", "TRUE", "True"] {
        assert_eq!(
            asked(
                &image,
                json!([{"name": "NVIDIA_DISABLE_REQUIRE", "value": on}])
            ),
            Ok(Vec::new()),
            "{on}"
        );
    }
    for off in ["0", "false", "yes", "", "on"] {
        assert_eq!(
            asked(
                &image,
                json!([{"name": "NVIDIA_DISABLE_REQUIRE", "value": off}])
            )
            .map(|a| a.len()),
            Ok(1),
            "{off}"
        );
    }
    // The image may turn it off; the pod may turn it back on.
    let disabled = [
        ("NVIDIA_REQUIRE_CUDA", "cuda>=12.4"),
        ("NVIDIA_DISABLE_REQUIRE", "true"),
    ];
    assert_eq!(asked(&disabled, json!([])), Ok(Vec::new()));
    assert_eq!(
        asked(
            &disabled,
            json!([{"name": "NVIDIA_DISABLE_REQUIRE", "value": "false"}])
        )
        .map(|a| a.len()),
        Ok(1)
    );
}

#[test]
fn a_legacy_image_requires_its_cuda_version() {
    assert_eq!(
        asked(&[("CUDA_VERSION", "11.8.0")], json!([])),
        Ok(vec![(
            "cuda>=11.8".to_string(),
            "CUDA_VERSION 11.8.0 of the image".to_string()
        )])
    );
    for (text, want) in [("12", "12.0"), ("v12.4", "12.4"), ("12.4.1-rc1", "12.4")] {
        assert_eq!(legacy_major_minor(text).as_deref(), Some(want), "{text}");
    }
    for text in ["12.4.1.0", "twelve", "012.4", "12..4", "-", ""] {
        assert_eq!(legacy_major_minor(text), None, "{text}");
    }
    // An empty NVIDIA_REQUIRE_CUDA leaves CUDA_VERSION to count (and requires nothing).
    assert_eq!(
        asked(
            &[("CUDA_VERSION", "11.8.0"), ("NVIDIA_REQUIRE_CUDA", "")],
            json!([])
        )
        .unwrap()
        .iter()
        .map(|a| a.0.as_str())
        .collect::<Vec<_>>(),
        vec!["", "cuda>=11.8"]
    );
    assert_eq!(
        asked(&[("CUDA_VERSION", "12.x")], json!([])),
        Err("CUDA_VERSION of the image is '12.x', not a version like 12.4.1 (the NVIDIA container toolkit refuses to start such a container)".to_string())
    );
}

#[test]
fn values_the_kubelet_fills_in_are_not_known() {
    let from = |name: &str| json!([{"name": name, "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]);
    let image = [
        ("NVIDIA_REQUIRE_CUDA", "cuda>=12.4"),
        ("CUDA_VERSION", "12.4.1"),
    ];
    // Whether anything is checked is unknown.
    assert_eq!(
        asked(&image, from("NVIDIA_DISABLE_REQUIRE")),
        Err("not known".into())
    );
    // The requirement it replaces is unknown, and so is CUDA_VERSION's (it counts only when
    // NVIDIA_REQUIRE_CUDA is empty).
    assert_eq!(asked(&image, from("NVIDIA_REQUIRE_CUDA")), Ok(Vec::new()));
    assert_eq!(
        asked(&[("CUDA_VERSION", "12.4.1")], from("CUDA_VERSION")),
        Ok(Vec::new())
    );
    // Another requirement so set leaves the image's to check.
    assert_eq!(
        asked(&image, from("NVIDIA_REQUIRE_ARCH")),
        Ok(vec![(
            "cuda>=12.4".to_string(),
            "NVIDIA_REQUIRE_CUDA of the image".to_string()
        )])
    );
    // Other variables are not read.
    assert!(
        container(json!([{"name": "PATH", "value": "/x"}]))
            .set
            .is_empty()
    );
}

#[test]
fn an_unreadable_requirement_names_the_variable_and_the_condition() {
    assert_eq!(
        asked(
            &[("NVIDIA_REQUIRE_CUDA", "cuda>=12.4 brand=tesla,driver>=abc")],
            json!([])
        ),
        Err("NVIDIA_REQUIRE_CUDA of the image cannot be read: 'driver>=abc' compares with 'abc', not a version like 12.4 (dotted whole numbers)".to_string())
    );
    assert_eq!(
        asked(&[], json!([{"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda=>12"}])),
        Err("NVIDIA_REQUIRE_CUDA in the container's env cannot be read: 'cuda=>12' has the operator '=>', not one of =, !=, <, <=, >, >=".into())
    );
}

#[test]
fn nvidias_own_value_is_read() {
    let r = required(
        &image_env(&[("NVIDIA_REQUIRE_CUDA", requirement::tests::CUDA_12_4_1)]),
        &container(json!(null)),
    )
    .unwrap();
    assert_eq!(holds_on(&r, "12.3", Some("545.23.08")), vec![Truth::No]);
    // A listed driver branch, on a GPU whose brand is not read.
    assert_eq!(
        holds_on(&r, "12.2", Some("535.104.05")),
        vec![Truth::Unknown]
    );
    assert_eq!(holds_on_cuda(&r, "12.4"), vec![Truth::Yes]);
}
