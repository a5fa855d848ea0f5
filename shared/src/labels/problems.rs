//! Every problem the policy reports, and how it is phrased. One place for the wording
//! users see (the README quotes it): each text says what is wrong, with the numbers and
//! names from the manifest, and exactly what to change.

use crate::limits::MAX_LISTED;
use std::fmt::{self, Write};

/// What a required label must hold, as shown in a fix: `<one of interactive, batch>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    NonEmpty,
    OneOf(Vec<String>),
    Pattern(String),
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expected::NonEmpty => f.write_str("<a non-empty value>"),
            Expected::OneOf(values) => {
                f.write_str("<one of ")?;
                for (i, value) in values.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(value)?;
                }
                f.write_str(">")
            }
            Expected::Pattern(p) => write!(f, "<a value matching {p}>"),
        }
    }
}

/// Whether a rule is about a bare pod or a pod template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    Pod,
    Template,
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Subject::Pod => "pod",
            Subject::Template => "pod template",
        })
    }
}

/// One broken rule. `who` reads `container 'app'`, `init container 'warmup'`,
/// `sidecar container 'proxy'`, `ephemeral container 'debug'` or `the pod-level
/// resources (spec.resources)`; `labels_at` is where the labels belong, e.g.
/// `spec.template.metadata.labels`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A required label is absent (`empty: false`) or has an empty value.
    MissingLabel {
        key: String,
        expected: Expected,
        labels_at: String,
        empty: bool,
    },
    /// The controller's own metadata has the label, its pod template does not.
    LabelOnObjectOnly {
        key: String,
        kind: String,
        suggestion: String,
        labels_at: String,
    },
    ValueNotAllowed {
        key: String,
        value: String,
        allowed: Vec<String>,
        did_you_mean: Option<String>,
        labels_at: String,
    },
    PatternMismatch {
        key: String,
        value: String,
        pattern: String,
        labels_at: String,
    },
    RequestWithoutLimit {
        who: String,
        resource: String,
        request: String,
    },
    RequestNotEqualLimit {
        who: String,
        resource: String,
        request: String,
        limit: String,
    },
    FractionalGpu {
        who: String,
        resource: String,
        value: String,
        rounded: u64,
    },
    /// Negative, unreadable or absurdly large: always denied, whatever the settings.
    InvalidGpuQuantity {
        who: String,
        resource: String,
        error: String,
    },
    /// GPUs reached through a DRA claim or a fractional-GPU share that cannot be
    /// counted: always denied.
    UncountableGpus {
        detail: String,
    },
    /// Kubernetes forbids resources on ephemeral containers: always denied.
    GpuInEphemeralContainer {
        who: String,
        gpus: String,
    },
    TooManyGpusInContainer {
        who: String,
        total: u64,
        gpus: String,
        max: u64,
    },
    TooManyGpusInPod {
        total: u64,
        gpus: String,
        max: u64,
    },
    NoCpuOrMemoryRequest {
        who: String,
        cpu: bool,
        memory: bool,
    },
    ToleratesGpuTaint {
        subject: Subject,
        taints: Vec<String>,
        tolerations: Vec<String>,
    },
    SelectsGpuNodes {
        subject: Subject,
        selectors: Vec<String>,
    },
    /// `deviceAccess.deviceEnvVars`: a device-runtime variable set to a value that names
    /// devices (`value` already cut to a quotable length); `resource` is what to request.
    DeviceEnvVar {
        who: String,
        name: String,
        value: String,
        resource: String,
    },
    /// ... set through `valueFrom` (`source` reads `ConfigMap 'c' key 'k'`).
    DeviceEnvVarFrom {
        who: String,
        name: String,
        source: String,
        resource: String,
    },
    /// `deviceAccess.privileged`; `reason` reads `requests GPUs`, `tolerates the GPU
    /// taint nvidia.com/gpu`, `selects GPU nodes with ...`.
    PrivilegedContainer {
        who: String,
        subject: Subject,
        reason: String,
    },
    /// `deviceAccess.deviceHostPaths`: `device` is the configured path the volume
    /// reaches; `contains` when the volume is a directory above it (`/dev`, `/`).
    DeviceHostPath {
        volume: String,
        path: String,
        device: String,
        contains: bool,
        subject: Subject,
        reason: String,
    },
    /// `deviceAccess.gpuRuntimeClasses`: a GPU runtime on a pod that requests no GPU.
    GpuRuntimeClass {
        subject: Subject,
        class: String,
    },
    /// `workloadRules`: `label` reads `workload-type: interactive`.
    NoReadinessProbe {
        who: String,
        label: String,
    },
    NoStartupProbe {
        who: String,
        label: String,
        min: u64,
    },
    ShortStartupProbe {
        who: String,
        threshold: u64,
        period: u64,
        budget: u64,
        min: u64,
        raise_to: u64,
    },
    RecreateStrategy {
        replicas: u64,
        label: String,
    },
    RolloutTakesPodsDown {
        /// `maxUnavailable` as written (`25%`, `2`).
        value: String,
        /// Not written: Kubernetes' default.
        unset: bool,
        down: u64,
        replicas: u64,
        /// maxUnavailable and maxSurge both resolve to 0: the controller takes one down.
        forced: bool,
        max: u64,
        label: String,
    },
    /// A rolling-update field that is neither an integer nor a percentage.
    BadRollout {
        field: String,
        error: String,
    },
    NoActiveDeadline {
        field: String,
        kind: String,
        label: String,
        max: Option<u64>,
    },
    ActiveDeadlineTooLong {
        field: String,
        seconds: u64,
        max: u64,
        label: String,
    },
    NoSharedMemory {
        who: String,
        gpus: u64,
        min: String,
    },
    SharedMemoryNotInMemory {
        who: String,
        volume: String,
        min: String,
    },
    SharedMemoryTooSmall {
        who: String,
        volume: String,
        size: String,
        min: String,
    },
    /// `gpuAccessLabel`: the workload's Namespace lacks the label (`value: None`) or holds
    /// a value that does not grant GPUs.
    NoGpuAccess {
        namespace: String,
        key: String,
        value: Option<String>,
        expected: Expected,
    },
    /// The workload's Namespace could not be read for `rule` (`gpuAccess`, `gpuSharing`);
    /// `what` reads `whether namespace ml may use GPUs (gpuAccessLabel gpu-access)`.
    NamespaceUnreadable {
        rule: &'static str,
        what: String,
        explanation: String,
    },
    /// `gpuSharing`: a sharing model no entry of `allow` grants this workload; `what`
    /// shows the model (`nvidia.com/gpu.shared`), `workload` reads `workload-type=batch`,
    /// `allowed_to` describes the entries that allow the model to others.
    SharingNotAllowed {
        model: super::tenancy::SharingModel,
        what: String,
        workload: String,
        namespace: String,
        allowed_to: Vec<String>,
        allowed_here: Vec<super::tenancy::SharingModel>,
    },
}

impl Problem {
    /// The rule of [`super::settings::RULE_NAMES`] the problem belongs to, the name an
    /// exception gives in `rules`; `None` for the problems no exception can excuse: GPU
    /// quantities that cannot be read or counted (the policy does not know what the pod
    /// holds) and resources on an ephemeral container (Kubernetes forbids them).
    pub fn rule(&self) -> Option<&'static str> {
        match self {
            Problem::MissingLabel { .. }
            | Problem::LabelOnObjectOnly { .. }
            | Problem::ValueNotAllowed { .. }
            | Problem::PatternMismatch { .. } => Some("requiredLabels"),
            Problem::RequestWithoutLimit { .. }
            | Problem::RequestNotEqualLimit { .. }
            | Problem::FractionalGpu { .. }
            | Problem::TooManyGpusInContainer { .. }
            | Problem::TooManyGpusInPod { .. }
            | Problem::NoCpuOrMemoryRequest { .. } => Some("gpuRequests"),
            Problem::InvalidGpuQuantity { .. }
            | Problem::UncountableGpus { .. }
            | Problem::GpuInEphemeralContainer { .. } => None,
            Problem::ToleratesGpuTaint { .. } | Problem::SelectsGpuNodes { .. } => Some("gpuNodes"),
            Problem::DeviceEnvVar { .. }
            | Problem::DeviceEnvVarFrom { .. }
            | Problem::PrivilegedContainer { .. }
            | Problem::DeviceHostPath { .. }
            | Problem::GpuRuntimeClass { .. } => Some("deviceAccess"),
            Problem::NoReadinessProbe { .. }
            | Problem::NoStartupProbe { .. }
            | Problem::ShortStartupProbe { .. }
            | Problem::RecreateStrategy { .. }
            | Problem::RolloutTakesPodsDown { .. }
            | Problem::BadRollout { .. }
            | Problem::NoActiveDeadline { .. }
            | Problem::ActiveDeadlineTooLong { .. }
            | Problem::NoSharedMemory { .. }
            | Problem::SharedMemoryNotInMemory { .. }
            | Problem::SharedMemoryTooSmall { .. } => Some("workloadRules"),
            Problem::NoGpuAccess { .. } => Some(super::tenancy::GPU_ACCESS_RULE),
            Problem::NamespaceUnreadable { rule, .. } => Some(rule),
            Problem::SharingNotAllowed { .. } => Some(super::tenancy::GPU_SHARING_RULE),
        }
    }
}

const REQUEST_A_GPU: &str =
    "or, if it needs a GPU, request one (e.g. nvidia.com/gpu: 1 in resources.limits)";

const TOOLING: &str = "or, for GPU tooling, list its namespace or service account in deviceAccess.privileged.allowNamespaces or allowServiceAccounts";

/// `parts` written one after the other: what `write!` does with text and `{}` arguments,
/// without the formatting machinery. Used for the problems most denials of labels spell out,
/// where `write!`'s cost showed in `kwctl bench` (BENCHMARKS.md, "Writing the labels denial").
fn pieces(f: &mut fmt::Formatter<'_>, parts: &[&str]) -> fmt::Result {
    parts.iter().try_for_each(|part| f.write_str(part))
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::MissingLabel {
                key,
                expected,
                labels_at,
                empty: false,
            } => {
                let missing = "' is missing (GPU pods must carry it): add ";
                pieces(f, &["label '", key, missing, key, ": "])?;
                fmt::Display::fmt(expected, f)?;
                pieces(f, &[" to ", labels_at])
            }
            Problem::MissingLabel {
                key,
                expected,
                labels_at,
                empty: true,
            } => write!(
                f,
                "label '{key}' is empty (GPU pods must carry it with a value): set {key}: {expected} in {labels_at}"
            ),
            Problem::LabelOnObjectOnly {
                key,
                kind,
                suggestion,
                labels_at,
            } => write!(
                f,
                "label '{key}' is on the {kind}'s own metadata.labels but not on its pod template, and pods only get the template's labels: put {key}: {suggestion} on {labels_at}"
            ),
            Problem::ValueNotAllowed {
                key,
                value,
                allowed,
                did_you_mean,
                labels_at,
            } => write!(
                f,
                "label {key}={value} is not allowed: set {key} to one of {} in {labels_at}{}",
                allowed.join(", "),
                IfSome(
                    " (values are case-sensitive: did you mean ",
                    did_you_mean,
                    "?)"
                )
            ),
            Problem::PatternMismatch {
                key,
                value,
                pattern,
                labels_at,
            } => write!(
                f,
                "label {key}={value} does not match the pattern {pattern} ('*' is any characters, '?' exactly one): change it in {labels_at}"
            ),
            Problem::RequestWithoutLimit {
                who,
                resource,
                request,
            } => write!(
                f,
                "{who} requests {resource}: {request} without a limit: put {resource}: {request} in its resources.limits (GPUs are allocated by limit)"
            ),
            Problem::RequestNotEqualLimit {
                who,
                resource,
                request,
                limit,
            } => write!(
                f,
                "{who} requests {resource}: {request} but limits it to {limit}: GPU requests must equal limits, so set both to the number of GPUs it needs (or drop the request; it defaults to the limit)"
            ),
            Problem::FractionalGpu {
                who,
                resource,
                value,
                rounded,
            } => write!(
                f,
                "{who} asks for {resource}: {value}, which is not a whole number: GPUs are whole devices, so ask for {resource}: {rounded}{}",
                if resource == "nvidia.com/gpu" {
                    " (for part of a GPU, use a MIG resource such as nvidia.com/mig-1g.10gb)"
                } else {
                    ""
                }
            ),
            Problem::InvalidGpuQuantity {
                who,
                resource,
                error,
            } => write!(
                f,
                "{who} has an invalid {resource} quantity: {error}; give a whole number of GPUs such as 1"
            ),
            Problem::NoGpuAccess {
                namespace,
                key,
                value: None,
                expected,
            } => write!(
                f,
                "namespace {namespace} may not use GPUs: its Namespace has no label {key} (gpuAccessLabel), which the cluster admins set on the namespaces allowed GPUs; ask them to set {key}: {expected} on it, or run the workload without GPUs"
            ),
            Problem::NoGpuAccess {
                namespace,
                key,
                value: Some(value),
                expected,
            } => write!(
                f,
                "namespace {namespace} may not use GPUs: its Namespace label {key} is '{value}', not {expected} (gpuAccessLabel); ask the cluster admins to set {key}: {expected} on it, or run the workload without GPUs"
            ),
            Problem::NamespaceUnreadable {
                what, explanation, ..
            } => write!(
                f,
                "{what} cannot be checked: {explanation}; the workload is denied until the policy can read its Namespace"
            ),
            Problem::SharingNotAllowed {
                model,
                what,
                workload,
                namespace,
                allowed_to,
                allowed_here,
            } => {
                write!(
                    f,
                    "shares a GPU through {model} ({what}), which gpuSharing.allow does not allow to {workload} in namespace {namespace} ({model} is allowed to "
                )?;
                match allowed_to.as_slice() {
                    [] => f.write_str("no workload")?,
                    entries => f.write_str(&entries.join("; "))?,
                }
                f.write_str("); ask for whole GPUs instead")?;
                let here: Vec<String> = allowed_here.iter().map(|m| m.to_string()).collect();
                match here.as_slice() {
                    [] => Ok(()),
                    models => write!(f, ", or share through {}", models.join(" or ")),
                }
            }
            Problem::UncountableGpus { detail } => write!(
                f,
                "{detail}; the GPU rules cannot check GPUs they cannot count, so the workload is denied"
            ),
            Problem::GpuInEphemeralContainer { who, gpus } => write!(
                f,
                "{who} asks for {gpus}, but ephemeral containers cannot hold resources: remove them (debug GPU work from a separate pod that requests the GPU)"
            ),
            Problem::TooManyGpusInContainer {
                who,
                total,
                gpus,
                max,
            } => write!(
                f,
                "{who} asks for {total} GPUs ({gpus}), more than the {max} allowed per container: ask for at most {max}, and spread the work over more pods"
            ),
            Problem::TooManyGpusInPod { total, gpus, max } => write!(
                f,
                "each pod holds {total} GPUs ({gpus}, counted as Kubernetes does: all app and sidecar containers, or the largest init container), more than the {max} allowed per pod: ask for at most {max} per pod and scale out with more pods"
            ),
            Problem::NoCpuOrMemoryRequest { who, cpu, memory } => {
                let (missing, fields) = match (cpu, memory) {
                    (true, true) => (
                        "cpu and no memory",
                        "resources.requests.cpu and resources.requests.memory",
                    ),
                    (true, false) => ("cpu", "resources.requests.cpu"),
                    _ => ("memory", "resources.requests.memory"),
                };
                pieces(
                    f,
                    &[
                        who,
                        " holds GPUs but requests no ",
                        missing,
                        ": set ",
                        fields,
                        " to what it uses, so it is not packed onto a GPU node without room for it",
                    ],
                )
            }
            Problem::ToleratesGpuTaint {
                subject,
                taints,
                tolerations,
            } => write!(
                f,
                "the {subject} requests no GPU but tolerates the GPU taint {} with {}: GPU nodes are for GPU work, so remove the toleration, {REQUEST_A_GPU}",
                taints.join(" and "),
                tolerations.join(" and ")
            ),
            Problem::SelectsGpuNodes { subject, selectors } => write!(
                f,
                "the {subject} requests no GPU but selects GPU nodes with {}: GPU nodes are for GPU work, so remove the selector, {REQUEST_A_GPU}",
                selectors.join(" and ")
            ),
            Problem::DeviceEnvVar {
                who,
                name,
                value,
                resource,
            } => write!(
                f,
                "{who} sets {name}={value}, which makes the container runtime hand it the GPUs that value names, uncounted by any GPU request: remove {name} and request the GPUs as a resource (e.g. {resource}: 1 in resources.limits); the device plugin sets {name} to the GPUs it allocates (only void or none may be written)"
            ),
            Problem::DeviceEnvVarFrom {
                who,
                name,
                source,
                resource,
            } => write!(
                f,
                "{who} sets {name} from {source} (valueFrom), which the policy cannot read at admission and the container runtime obeys: remove {name} and request the GPUs as a resource (e.g. {resource}: 1 in resources.limits); the device plugin sets {name} to the GPUs it allocates"
            ),
            Problem::PrivilegedContainer {
                who,
                subject,
                reason,
            } => write!(
                f,
                "{who} is privileged (securityContext.privileged: true) in a {subject} that {reason}: it sees every device of the node, every GPU included, not only the GPUs it requests; remove privileged: true and request the GPUs as a resource, {TOOLING}"
            ),
            Problem::DeviceHostPath {
                volume,
                path,
                device,
                contains,
                subject,
                reason,
            } => write!(
                f,
                "volume '{volume}' mounts the host path {path}, {} (deviceAccess.deviceHostPaths: {device}), into a {subject} that {reason}: every container that mounts it reaches GPUs no request counts; remove the volume and request the GPUs as a resource, {TOOLING}",
                if *contains {
                    "which contains GPU devices"
                } else {
                    "a GPU device"
                }
            ),
            Problem::GpuRuntimeClass { subject, class } => write!(
                f,
                "the {subject} requests no GPU but sets runtimeClassName: {class}, a GPU runtime (deviceAccess.gpuRuntimeClasses) that can hand it GPUs no request counts: remove runtimeClassName, {REQUEST_A_GPU}"
            ),
            Problem::NoReadinessProbe { who, label } => write!(
                f,
                "{who} serves ({label}) without a readinessProbe: add one (e.g. httpGet on the model server's health endpoint), so no request reaches a replica before its model is loaded"
            ),
            Problem::NoStartupProbe { who, label, min } => write!(
                f,
                "{who} ({label}) has no startupProbe: add one whose failureThreshold x periodSeconds is at least {min} s (e.g. periodSeconds: 10, failureThreshold: {}), so the model can load before the liveness probe counts",
                min.div_ceil(10)
            ),
            Problem::ShortStartupProbe {
                who,
                threshold,
                period,
                budget,
                min,
                raise_to,
            } => write!(
                f,
                "the startupProbe of {who} gives the model {budget} s to load (failureThreshold {threshold} x periodSeconds {period}), less than the {min} s required: raise failureThreshold to {raise_to}"
            ),
            Problem::RecreateStrategy { replicas, label } => write!(
                f,
                "spec.strategy.type is Recreate: a rollout stops all {replicas} replicas ({label}) before new ones start; use type: RollingUpdate with rollingUpdate.maxUnavailable: 0 and maxSurge: 1"
            ),
            Problem::RolloutTakesPodsDown {
                value,
                unset,
                down,
                replicas,
                forced,
                max,
                label,
            } => {
                let value = if *unset {
                    format!("{value} (the default, as it is not set)")
                } else {
                    value.clone()
                };
                let why = if *forced {
                    " (with maxSurge 0 too, the Deployment controller takes one down to make progress)"
                } else {
                    ""
                };
                write!(
                    f,
                    "spec.strategy.rollingUpdate.maxUnavailable is {value}: a rollout takes {down} of {replicas} replicas ({label}) down at once{why}, more than the {max} allowed; set spec.strategy.rollingUpdate.maxUnavailable: {max} and maxSurge: 1 (new pods start before old ones stop, so the pool needs room for the surge's GPUs)"
                )
            }
            Problem::BadRollout { field, error } => write!(f, "{field} {error}"),
            Problem::NoActiveDeadline {
                field,
                kind,
                label,
                max,
            } => write!(
                f,
                "{field} is not set: a {kind} ({label}) holds its GPUs until it ends, however long it idles or hangs; set {field}{}",
                IfSome(" (at most ", max, ")")
            ),
            Problem::ActiveDeadlineTooLong {
                field,
                seconds,
                max,
                label,
            } => write!(
                f,
                "{field} is {seconds}, more than the {max} s allowed ({label}): lower it to {max} or less"
            ),
            Problem::NoSharedMemory { who, gpus, min } => write!(
                f,
                "{who} holds {gpus} GPUs with no memory-backed /dev/shm (the container runtime gives 64 MiB, too little for NCCL and DataLoader workers): add the volume {{name: dshm, emptyDir: {{medium: Memory, sizeLimit: {min}}}}} and mount it in the container at /dev/shm"
            ),
            Problem::SharedMemoryNotInMemory { who, volume, min } => write!(
                f,
                "{who} mounts volume '{volume}' at /dev/shm, which is not memory-backed: make it emptyDir: {{medium: Memory, sizeLimit: {min}}}"
            ),
            Problem::SharedMemoryTooSmall {
                who,
                volume,
                size,
                min,
            } => write!(
                f,
                "the /dev/shm of {who} (volume '{volume}') is limited to {size}, less than {min}: set its emptyDir.sizeLimit to {min} or more"
            ),
        }
    }
}

/// `before`, the value and `after` when there is a value; nothing when there is none.
struct IfSome<'a, T>(&'static str, &'a Option<T>, &'static str);

impl<T: fmt::Display> fmt::Display for IfSome<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(value) => write!(f, "{}{value}{}", self.0, self.2),
            None => Ok(()),
        }
    }
}

/// A problem and the pod template it was found in (`spec.template.spec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub location: String,
    pub problem: Problem,
}

/// `Deployment 'llm'`, `Pod 'llm-5d8f-*'` (generateName), or just the kind.
pub fn describe_object(kind: &str, name: &str, generate_name: &str) -> String {
    if !name.is_empty() {
        format!("{kind} '{name}'")
    } else if !generate_name.is_empty() {
        format!("{kind} '{generate_name}*'")
    } else {
        kind.to_string()
    }
}

/// `1 problem`, `3 problems`.
pub fn count_problems(n: usize) -> String {
    let mut out = String::new();
    push_count_of_problems(&mut out, n);
    out
}

fn push_count_of_problems(out: &mut String, n: usize) {
    out.push_str(itoa::Buffer::new().format(n));
    out.push_str(if n == 1 { " problem" } else { " problems" });
}

/// Bytes reserved for a rejection message: most hold a few findings of one or two hundred
/// bytes each, so the message is written without growing.
const MESSAGE_CAPACITY: usize = 1024;

/// The rejection message: the findings, numbered, prefixed with their template location
/// when the object has several templates. At most [`MAX_LISTED`] are spelled
/// out; the rest are counted ([`more_problems`]).
pub fn rejection_message(object: &str, findings: &[Finding], several_templates: bool) -> String {
    let mut out = String::with_capacity(MESSAGE_CAPACITY);
    out.push_str(object);
    out.push_str(" breaks the GPU admission rules (");
    push_count_of_problems(&mut out, findings.len());
    out.push_str("): ");
    let mut number = itoa::Buffer::new();
    for (i, finding) in findings.iter().take(MAX_LISTED).enumerate() {
        if i > 0 {
            out.push_str("; ");
        }
        out.push_str(number.format(i + 1));
        out.push_str(") ");
        if several_templates {
            out.push_str(&finding.location);
            out.push_str(": ");
        }
        // Writing into a String cannot fail.
        let _ = write!(out, "{}", finding.problem);
    }
    if let Some(more) = more_problems(findings.len()) {
        out.push_str("; ");
        out.push_str(&more);
    }
    out
}

/// What stands for the problems beyond [`MAX_LISTED`]: `and 5 more problems, not
/// listed here`; `None` when all are listed.
pub fn more_problems(total: usize) -> Option<String> {
    (total > MAX_LISTED).then(|| {
        let more = total - MAX_LISTED;
        format!(
            "and {more} more problem{}, not listed here",
            if more == 1 { "" } else { "s" }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{text_ends, text_says, text_starts};
    use rstest::rstest;

    const AT: &str = "spec.template.metadata.labels";

    /// At `location`, the label `key` is missing from x.labels.
    fn missing(location: &str, key: String) -> Finding {
        Finding {
            location: location.into(),
            problem: Problem::MissingLabel {
                key,
                expected: Expected::NonEmpty,
                labels_at: "x.labels".into(),
                empty: false,
            },
        }
    }

    #[rstest]
    #[case::missing(Problem::MissingLabel { key: "workload-type".into(), expected: Expected::OneOf(vec!["interactive".into(), "batch".into()]), labels_at: AT.into(), empty: false },
        "label 'workload-type' is missing (GPU pods must carry it): add workload-type: <one of interactive, batch> to spec.template.metadata.labels")]
    #[case::empty(Problem::MissingLabel { key: "team".into(), expected: Expected::NonEmpty, labels_at: "metadata.labels".into(), empty: true },
        "label 'team' is empty (GPU pods must carry it with a value): set team: <a non-empty value> in metadata.labels")]
    #[case::on_object(Problem::LabelOnObjectOnly { key: "team".into(), kind: "Deployment".into(), suggestion: "ml".into(), labels_at: AT.into() },
        "label 'team' is on the Deployment's own metadata.labels but not on its pod template, and pods only get the template's labels: put team: ml on spec.template.metadata.labels")]
    #[case::not_allowed(Problem::ValueNotAllowed { key: "workload-type".into(), value: "Batch".into(), allowed: vec!["interactive".into(), "batch".into()], did_you_mean: Some("batch".into()), labels_at: AT.into() },
        "label workload-type=Batch is not allowed: set workload-type to one of interactive, batch in spec.template.metadata.labels (values are case-sensitive: did you mean batch?)")]
    #[case::pattern(Problem::PatternMismatch { key: "cost-center".into(), value: "42".into(), pattern: "cc-????".into(), labels_at: AT.into() },
        "label cost-center=42 does not match the pattern cc-???? ('*' is any characters, '?' exactly one): change it in spec.template.metadata.labels")]
    #[case::fraction_mig_hint(Problem::FractionalGpu { who: "container 'a'".into(), resource: "nvidia.com/gpu".into(), value: "0.5".into(), rounded: 1 },
        "container 'a' asks for nvidia.com/gpu: 0.5, which is not a whole number: GPUs are whole devices, so ask for nvidia.com/gpu: 1 (for part of a GPU, use a MIG resource such as nvidia.com/mig-1g.10gb)")]
    #[case::fraction_amd(Problem::FractionalGpu { who: "container 'a'".into(), resource: "amd.com/gpu".into(), value: "1500m".into(), rounded: 2 },
        "container 'a' asks for amd.com/gpu: 1500m, which is not a whole number: GPUs are whole devices, so ask for amd.com/gpu: 2")]
    #[case::cpu_only(Problem::NoCpuOrMemoryRequest { who: "container 'a'".into(), cpu: true, memory: false },
        "container 'a' holds GPUs but requests no cpu: set resources.requests.cpu to what it uses, so it is not packed onto a GPU node without room for it")]
    #[case::both(Problem::NoCpuOrMemoryRequest { who: "container 'a'".into(), cpu: true, memory: true },
        "container 'a' holds GPUs but requests no cpu and no memory: set resources.requests.cpu and resources.requests.memory to what it uses, so it is not packed onto a GPU node without room for it")]
    #[case::memory_only(Problem::NoCpuOrMemoryRequest { who: "container 'a'".into(), cpu: false, memory: true },
        "container 'a' holds GPUs but requests no memory: set resources.requests.memory to what it uses, so it is not packed onto a GPU node without room for it")]
    fn wording(#[case] problem: Problem, #[case] text: &str) {
        assert_eq!(problem.to_string(), text);
    }

    #[rstest]
    #[case::named("Pod", "p", "p-", "Pod 'p'")]
    #[case::generated("Pod", "", "llm-5d8f-", "Pod 'llm-5d8f-*'")]
    #[case::anonymous("Pod", "", "", "Pod")]
    fn object_names(#[case] kind: &str, #[case] n: &str, #[case] g: &str, #[case] out: &str) {
        assert_eq!(describe_object(kind, n, g), out);
    }

    #[test]
    fn message_numbers_findings_and_names_locations_when_several() {
        let finding = |location: &str, key: &str| missing(location, key.into());
        let one = rejection_message("Pod 'p'", &[finding("spec", "team")], false);
        assert_eq!(
            one,
            "Pod 'p' breaks the GPU admission rules (1 problem): 1) label 'team' is missing (GPU pods must carry it): add team: <a non-empty value> to x.labels"
        );
        let two = rejection_message(
            "RayCluster 'r'",
            &[finding("a.spec", "team"), finding("b.spec", "owner")],
            true,
        );
        text_starts(
            &two,
            "RayCluster 'r' breaks the GPU admission rules (2 problems): 1) a.spec: label 'team'",
        );
        text_says(&two, "; 2) b.spec: label 'owner'");
    }

    #[test]
    fn message_lists_ten_problems_and_counts_the_rest() {
        let finding = |i: usize| missing("spec", format!("k{i}"));
        let at_limit: Vec<Finding> = (1..=MAX_LISTED).map(finding).collect();
        let m = rejection_message("Pod 'p'", &at_limit, false);
        assert!(
            m.contains("10) label 'k10'") && !m.contains("more problem"),
            "{m}"
        );
        let over: Vec<Finding> = (1..=MAX_LISTED + 2).map(finding).collect();
        let m = rejection_message("Pod 'p'", &over, false);
        text_starts(&m, "Pod 'p' breaks the GPU admission rules (12 problems): ");
        text_ends(
            &m,
            "10) label 'k10' is missing (GPU pods must carry it): add k10: <a non-empty value> to x.labels; and 2 more problems, not listed here",
        );
        assert!(!m.contains("k11"), "{m}");
        assert_eq!(
            more_problems(MAX_LISTED + 1).as_deref(),
            Some("and 1 more problem, not listed here")
        );
    }
}
