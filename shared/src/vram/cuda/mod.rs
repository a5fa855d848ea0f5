//! What a GPU container's environment requires of the node's driver (settings
//! `imageLabels.cudaRequirementFromEnv`, with `imageLabels` and `nodeInventory` on).
//!
//! NVIDIA's CUDA images set `NVIDIA_REQUIRE_CUDA` (and older ones only `CUDA_VERSION`) in
//! their config's `Env`. Before starting a GPU container, the NVIDIA container toolkit's
//! hook reads the container's environment, the image's with the pod's `env` over it, as
//! NVIDIA's `internal/config/image/cuda_image.go` does:
//!
//! - `NVIDIA_DISABLE_REQUIRE` true (Go's `strconv.ParseBool`: `1`, `t`, `true`, ...):
//!   nothing is checked;
//! - every `NVIDIA_REQUIRE_*` variable but `NVIDIA_REQUIRE_JETPACK*` is a requirement
//!   ([`requirement`]), all of which must hold;
//! - `CUDA_VERSION` without a non-empty `NVIDIA_REQUIRE_CUDA` (a "legacy" image) requires
//!   `cuda>=<major>.<minor>` of it.
//!
//! Variables from `envFrom` are not visible at admission and not read. A variable the pod
//! sets with `valueFrom` is filled in by the kubelet: a requirement so set is unknown and not
//! checked (the others are), and `NVIDIA_DISABLE_REQUIRE` so set leaves nothing checked.

pub mod requirement;

use super::image::Images;
use crate::inventory::GpuNode;
use crate::podspec::Container;
use requirement::{Facts, Requirement, Truth};
use std::collections::BTreeMap;

/// The variable turning the toolkit's requirement checks off.
pub const DISABLE_REQUIRE: &str = "NVIDIA_DISABLE_REQUIRE";
/// The prefix of the toolkit's requirement variables.
pub const REQUIRE_PREFIX: &str = "NVIDIA_REQUIRE_";
/// The one requirement variable the toolkit leaves to Jetson's own checks.
const REQUIRE_JETPACK: &str = "NVIDIA_REQUIRE_JETPACK";
/// The CUDA version of a legacy CUDA image.
pub const CUDA_VERSION: &str = "CUDA_VERSION";
const REQUIRE_CUDA: &str = "NVIDIA_REQUIRE_CUDA";

/// Whether the toolkit reads `name` for its requirements.
pub fn is_read(name: &str) -> bool {
    name.starts_with(REQUIRE_PREFIX) || name == DISABLE_REQUIRE || name == CUDA_VERSION
}

/// A GPU container: its image, and what its `env` sets of the variables [`is_read`]
/// (`None`: set with `valueFrom`), in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEnv {
    /// `container server`, `container server in spec.template.spec`.
    pub who: String,
    pub image: String,
    pub set: Vec<(String, Option<String>)>,
}

impl ContainerEnv {
    /// `None` for a container without an image.
    pub fn of(container: &Container, who: String) -> Option<ContainerEnv> {
        let image = container.image.as_deref().map(str::trim)?;
        if image.is_empty() {
            return None;
        }
        let set = container
            .env
            .iter()
            .filter(|e| is_read(&e.name))
            .map(|e| {
                let value = if e.value_from {
                    None
                } else {
                    Some(e.value.clone().unwrap_or_default())
                };
                (e.name.clone(), value)
            })
            .collect();
        Some(ContainerEnv {
            who,
            image: image.to_string(),
            set,
        })
    }
}

/// One requirement of a container, with where it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub requirement: Requirement,
    /// `NVIDIA_REQUIRE_CUDA of the image`, `NVIDIA_REQUIRE_CUDA in the container's env`.
    pub source: String,
}

/// What a container's environment requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Required {
    /// Nothing: no requirement variable, or `NVIDIA_DISABLE_REQUIRE` true.
    Nothing,
    /// `NVIDIA_DISABLE_REQUIRE` is set with `valueFrom`: whether anything is checked is
    /// unknown at admission.
    NotKnown,
    /// Every requirement (at least one).
    All(Vec<Asked>),
}

/// Where a variable's value comes from.
#[derive(Clone, Copy)]
enum Origin {
    Image,
    Container,
}

impl Origin {
    fn of(&self, name: &str) -> String {
        match self {
            Origin::Image => format!("{name} of the image"),
            Origin::Container => format!("{name} in the container's env"),
        }
    }
}

/// The requirements of `container`, whose image's config sets `image_env` (the variables
/// [`is_read`], in order). `Err` says which variable cannot be read and why.
pub fn required(
    image_env: &[(String, String)],
    container: &ContainerEnv,
) -> Result<Required, String> {
    // The environment as the toolkit sees it: the image's, then the pod's over it.
    let mut env: Vec<(&str, Option<&str>, Origin)> = Vec::new();
    let entries = image_env
        .iter()
        .map(|(n, v)| (n.as_str(), Some(v.as_str()), Origin::Image))
        .chain(
            container
                .set
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_deref(), Origin::Container)),
        );
    for (name, value, origin) in entries {
        env.retain(|(n, _, _)| *n != name);
        env.push((name, value, origin));
    }
    let get = |name: &str| env.iter().find(|(n, _, _)| *n == name);

    if let Some((_, value, _)) = get(DISABLE_REQUIRE) {
        match value {
            None => return Ok(Required::NotKnown),
            Some(v) if go_bool(v) => return Ok(Required::Nothing),
            Some(_) => {}
        }
    }
    let mut asked = Vec::new();
    for (name, value, origin) in &env {
        if !name.starts_with(REQUIRE_PREFIX) || name.starts_with(REQUIRE_JETPACK) {
            continue;
        }
        // Filled in by the kubelet: this one is not known; the others still must hold.
        let Some(text) = value else {
            continue;
        };
        let source = origin.of(name);
        let requirement =
            Requirement::parse(text).map_err(|why| format!("{source} cannot be read: {why}"))?;
        asked.push(Asked {
            requirement,
            source,
        });
    }
    // A legacy image: `CUDA_VERSION` counts when `NVIDIA_REQUIRE_CUDA` is known to be empty.
    let require_cuda_empty = match get(REQUIRE_CUDA) {
        None => true,
        Some((_, value, _)) => value.is_some_and(str::is_empty),
    };
    if require_cuda_empty && let Some((_, value, origin)) = get(CUDA_VERSION) {
        match value {
            None | Some("") => {}
            Some(text) => {
                let source = origin.of(CUDA_VERSION);
                let major_minor = legacy_major_minor(text).ok_or_else(|| {
                    format!(
                        "{source} is '{}', not a version like 12.4.1 (the NVIDIA container toolkit refuses to start such a container)",
                        shorten(text)
                    )
                })?;
                let requirement = Requirement::parse(&format!("cuda>={major_minor}"))?;
                asked.push(Asked {
                    requirement,
                    source: origin.of(&format!("{CUDA_VERSION} {text}")),
                });
            }
        }
    }
    Ok(if asked.is_empty() {
        Required::Nothing
    } else {
        Required::All(asked)
    })
}

/// The denial when a requirement of `container` rules out every one of `nodes` (the nodes
/// that offer the pod's GPUs); `Ok(None)` when some node may meet them all, or when nothing
/// is known to check (the image's config cannot be read: the model step says why; a
/// variable set with `valueFrom`). `Err` is a warning: a requirement that cannot be read.
pub fn check(
    images: &Images<'_>,
    container: &ContainerEnv,
    nodes: &[&GpuNode],
) -> Result<Option<String>, String> {
    let not_checked = "its CUDA requirement is not checked against the nodes (imageLabels.cudaRequirementFromEnv)";
    let Ok(info) = images.info(&container.image) else {
        return Ok(None);
    };
    let env = info.cuda_env.map_err(|e| {
        format!(
            "the config of image {} is unreadable: {e}; {not_checked}",
            container.image
        )
    })?;
    let asked = match required(&env, container) {
        Ok(Required::All(asked)) => asked,
        Ok(Required::Nothing | Required::NotKnown) => return Ok(None),
        Err(e) => {
            return Err(format!(
                "{} (image {}): {e}; {not_checked}",
                container.who, container.image
            ));
        }
    };
    Ok(asked.iter().find_map(|a| unmet(container, a, nodes)))
}

/// The denial when `asked` rules out every one of `nodes`, naming what it asks for, the
/// nodes' products with their CUDA and driver versions, and the fix.
fn unmet(container: &ContainerEnv, asked: &Asked, nodes: &[&GpuNode]) -> Option<String> {
    let ruled_out = |n: &GpuNode| {
        let facts = Facts {
            cuda: n.cuda.as_ref(),
            driver: n.driver.as_ref(),
        };
        asked.requirement.holds(facts) == Truth::No
    };
    if nodes.is_empty() || !nodes.iter().all(|n| ruled_out(n)) {
        return None;
    }
    let shown = |v: &Option<crate::inventory::Version>| {
        v.as_ref()
            .map_or_else(|| "not reported".to_string(), ToString::to_string)
    };
    let mut groups: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for n in nodes {
        let product = n
            .product
            .clone()
            .unwrap_or_else(|| "GPUs without a product label".into());
        *groups
            .entry((product, shown(&n.cuda), shown(&n.driver)))
            .or_default() += 1;
    }
    const MAX_GROUPS: usize = 5;
    let mut offered: Vec<String> = groups
        .iter()
        .take(MAX_GROUPS)
        .map(|((product, cuda, driver), count)| {
            let count = if *count == 1 {
                "1 node".to_string()
            } else {
                format!("{count} nodes")
            };
            format!("{product} with CUDA {cuda} and driver {driver} ({count})")
        })
        .collect();
    if groups.len() > MAX_GROUPS {
        offered.push(format!("(+{} more)", groups.len() - MAX_GROUPS));
    }
    let r = &asked.requirement;
    let more = match r.more() {
        0 => String::new(),
        1 => "; its other alternative is not met either".to_string(),
        n => format!("; none of its {n} other alternatives is met either"),
    };
    let newest = nodes.iter().filter_map(|n| n.cuda.as_ref()).max();
    let fix = match (r.least_cuda(), newest) {
        (Some(_), Some(newest)) => {
            format!("use an image built for CUDA {newest} or older, or update the nodes' driver")
        }
        _ => "use an image the nodes' driver supports, or update the nodes' driver".to_string(),
    };
    Some(format!(
        "{} runs image {}, which requires {} ({}{more}), and no node that offers its GPUs meets it: {}. The NVIDIA container toolkit refuses to start it there: {fix}",
        container.who,
        container.image,
        r.first(),
        asked.source,
        offered.join(", ")
    ))
}

/// Go's `strconv.ParseBool` true values.
fn go_bool(v: &str) -> bool {
    matches!(v, "1" | "t" | "T" | "TRUE" | "true" | "True")
}

/// `12.4` of a semantic version (`12.4.1`, `v12.4`, `12`, `12.4.1-rc1`), as the toolkit
/// reads `CUDA_VERSION`; `None` for anything else.
fn legacy_major_minor(text: &str) -> Option<String> {
    let bare = text.strip_prefix('v').unwrap_or(text);
    let core = bare.split(['-', '+']).next()?;
    let parts: Vec<&str> = core.split('.').collect();
    let number = |p: &&str| {
        !p.is_empty()
            && p.len() <= 9
            && p.bytes().all(|b| b.is_ascii_digit())
            && (p.len() == 1 || !p.starts_with('0'))
    };
    if parts.is_empty() || parts.len() > 3 || !parts.iter().all(number) {
        return None;
    }
    Some(format!("{}.{}", parts[0], parts.get(1).unwrap_or(&"0")))
}

/// At most 60 characters of `text`, for messages.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(60) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests;
