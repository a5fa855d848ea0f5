//! The words every policy uses for the object a request is about: its namespace, its name,
//! `Deployment ml/llm`, and the one denial of an object no policy can read.

use crate::admission::{AdmissionRequest, Verdict};
use crate::workload::At;
use serde_json::Value;

/// The namespace of the request, or of its object when the request names none (a
/// request written by hand for `kwctl run`).
pub fn request_namespace(request: &AdmissionRequest) -> &str {
    if !request.namespace.is_empty() {
        return &request.namespace;
    }
    request
        .object
        .at("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The denial of an object the policy cannot read (its pod templates, or an autoscaler's
/// spec): one message for every policy, with code 400.
pub fn unreadable(request: &AdmissionRequest, reason: impl std::fmt::Display) -> Verdict {
    Verdict::reject(format!(
        "{} cannot be read, so it is denied: {reason}. Fix the manifest (for a custom resource, check its customKinds entry in the policy settings)",
        describe(request)
    ))
    .with_code(400)
}

/// The name of the request's object: the request's, else the object's `metadata.name`
/// (empty for an object with a generated name).
pub fn object_name(request: &AdmissionRequest) -> &str {
    if request.name.is_empty() {
        request
            .object
            .at("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    } else {
        request.name.as_str()
    }
}

/// `Deployment ml/llm` (`Pod ml/llm-*` for a generated name), for messages.
pub fn describe(request: &AdmissionRequest) -> String {
    let object = &request.object;
    let text = |p: &str| object.at(p).and_then(Value::as_str).unwrap_or("");
    let kind = Some(text("/kind"))
        .filter(|k| !k.is_empty())
        .unwrap_or(&request.kind.kind);
    let kind = if kind.is_empty() { "object" } else { kind };
    let name = match object_name(request) {
        "" => match text("/metadata/generateName") {
            "" => String::new(),
            prefix => format!("{prefix}*"),
        },
        name => name.to_string(),
    };
    match (request_namespace(request), name.as_str()) {
        (_, "") => kind.to_string(),
        ("", name) => format!("{kind} {name}"),
        (namespace, name) => format!("{kind} {namespace}/{name}"),
    }
}
