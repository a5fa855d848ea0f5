use super::*;
use crate::capacity::queries::{parent_query, pod_query};
use crate::cluster::ListInNamespace;
use crate::pools::Pool;
use crate::pools::ceiling::node_pool_query;
use crate::pools::nodes::node_query;
use crate::selector::LabelSelector;
use rstest::rstest;
use serde_json::json;

fn pool() -> Pool {
    Pool {
        name: "a100".into(),
        node_selector: serde_json::from_value::<LabelSelector>(json!({
            "matchLabels": {"gpu-admission/pool": "a100"}
        }))
        .unwrap(),
        ..Pool::default()
    }
}

/// kwctl's text for a connection refused by the API server's port (`RUST_BACKTRACE=1`).
const REFUSED: &str = "Callback evaluation failure: ServiceError: client error (Connect)\n\nCaused by:\n    0: client error (Connect)\n    1: tcp connect error\n    2: Connection refused (os error 111)\n\nStack backtrace:\n   0: <unknown>\n  17: start_thread\n             at ./nptl/pthread_create.c:442:8";

fn failure(request: ClusterRequest, raw: &str) -> HostFailure {
    HostFailure {
        request: Box::new(request),
        error: HostError::Call(raw.into()),
    }
}

/// Each class, from the texts kwctl 1.36 gave against an API server stub (the module's
/// table), and the API server's own.
#[rstest]
#[case::not_granted(
    "Policy has not been granted access to Kubernetes v1/Node resources. The violation has been reported.",
    FailureClass::NotGranted
)]
#[case::not_granted_callback(
    "Callback evaluation failure: Policy has not been granted access to Kubernetes karpenter.sh/v1/NodePool resources. The violation has been reported.",
    FailureClass::NotGranted
)]
#[case::forbidden(
    "pods is forbidden: User \"system:serviceaccount:kubewarden:policy-server-default\" cannot list resource \"pods\" in API group \"\" at the cluster scope",
    FailureClass::Forbidden
)]
#[case::forbidden_status(
    "Callback evaluation failure: ApiError: nodes is forbidden: User \"system:serviceaccount:kubewarden:policy-server\" cannot list resource \"nodes\" in API group \"\" at the cluster scope: Forbidden (Status { status: Some(Failure), code: 403, message: \"nodes is forbidden\", metadata: Some(ListMeta { continue_: None, remaining_item_count: None, resource_version: None, self_link: None }), reason: \"Forbidden\", details: None })",
    FailureClass::Forbidden
)]
#[case::not_found(
    "Callback evaluation failure: Cannot find karpenter.sh/v1/NodePool named 'a100' inside of namespace 'None'",
    FailureClass::NotFound
)]
#[case::not_found_status(
    "ApiError: deployments.apps \"llm\" not found: NotFound (ErrorResponse { status: \"Failure\", message: \"deployments.apps \\\"llm\\\" not found\", reason: \"NotFound\", code: 404 })",
    FailureClass::NotFound
)]
#[case::refused(REFUSED, FailureClass::Unreachable(Unreachable::ConnectionRefused))]
#[case::dns(
    "Callback evaluation failure: ServiceError: client error (Connect)\n\nCaused by:\n    0: client error (Connect)\n    1: dns error\n    2: failed to lookup address information: Name or service not known",
    FailureClass::Unreachable(Unreachable::Dns)
)]
#[case::reset(
    "Callback evaluation failure: ServiceError: client error (SendRequest)\n\nCaused by:\n    0: client error (SendRequest)\n    1: connection error\n    2: Connection reset by peer (os error 104)",
    FailureClass::Unreachable(Unreachable::ConnectionReset)
)]
#[case::connect(
    "ServiceError: client error (Connect): tcp connect error: Network is unreachable (os error 101)",
    FailureClass::Unreachable(Unreachable::Connect)
)]
#[case::timed_out(
    "ServiceError: error trying to connect: operation timed out",
    FailureClass::TimedOut
)]
#[case::read_timeout(
    "Callback evaluation failure: ServiceError: client error (SendRequest)\n\nCaused by:\n    0: client error (SendRequest)\n    1: connection error\n    2: timed out",
    FailureClass::TimedOut
)]
#[case::deadline("deadline has elapsed", FailureClass::TimedOut)]
#[case::server_error(
    "Callback evaluation failure: ApiError: Internal error occurred: etcdserver: leader changed: InternalError (Status { status: Some(Failure), code: 500, message: \"Internal error occurred: etcdserver: leader changed\", metadata: Some(ListMeta { continue_: None, remaining_item_count: None, resource_version: None, self_link: None }), reason: \"InternalError\", details: None })\n\nCaused by:\n    Internal error occurred: etcdserver: leader changed: InternalError",
    FailureClass::ServerError(Some(500))
)]
#[case::etcd_timeout(
    "ApiError: Internal error occurred: etcdserver: request timed out: InternalError (Status { code: 500 })",
    FailureClass::ServerError(Some(500))
)]
#[case::bad_gateway(
    "Callback evaluation failure: ApiError: <html><body>Bad Gateway</body></html>: Failed to parse error data (Status { status: Some(Failure), code: 502, message: \"<html><body>Bad Gateway</body></html>\", metadata: None, reason: \"Failed to parse error data\", details: None })",
    FailureClass::ServerError(Some(502))
)]
#[case::unavailable(
    "ApiError: the server is currently unable to handle the request: ServiceUnavailable (ErrorResponse { status: \"Failure\", message: \"\", reason: \"ServiceUnavailable\", code: 503 })",
    FailureClass::ServerError(Some(503))
)]
#[case::throttled(
    "Callback evaluation failure: ApiError: Too many requests, please try again later.: TooManyRequests (Status { status: Some(Failure), code: 429, message: \"Too many requests, please try again later.\", metadata: Some(ListMeta { continue_: None, remaining_item_count: None, resource_version: None, self_link: None }), reason: \"TooManyRequests\", details: None })",
    FailureClass::ServerError(Some(429))
)]
#[case::replay("the list of recorded responses is empty", FailureClass::Other)]
#[case::nothing("boom", FailureClass::Other)]
fn host_texts_are_classified(#[case] raw: &str, #[case] class: FailureClass) {
    assert_eq!(classify(raw), class, "{raw}");
    assert_eq!(failure(node_query(&pool()), raw).class(), class);
}

/// The message of each class: what could not be done, the class in the words other suites
/// match, and what to change.
#[rstest]
#[case::not_granted(
    node_query(&pool()),
    "Policy has not been granted access to Kubernetes v1/Node resources. The violation has been reported.",
    "cannot list v1/Node: not granted to this policy: add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy's contextAwareResources"
)]
#[case::forbidden(
    pod_query("gpu-admission/pool", &pool()),
    "pods is forbidden: User \"system:serviceaccount:kubewarden:policy-server-default\" cannot list resource \"pods\" in API group \"\" at the cluster scope",
    "cannot list v1/Pod: forbidden by RBAC: grant the policy-server's ServiceAccount list and watch on pods"
)]
#[case::get_forbidden(
    parent_query("apps/v1", "StatefulSet", "llama", "ml"),
    "statefulsets.apps \"llama\" is forbidden",
    "cannot get apps/v1/StatefulSet ml/llama: forbidden by RBAC: grant the policy-server's ServiceAccount get on statefulsets (apiGroup apps)"
)]
#[case::node_pool_not_found(
    node_pool_query("a100"),
    "Callback evaluation failure: Cannot find karpenter.sh/v1/NodePool named 'a100' inside of namespace 'None'",
    "cannot get karpenter.sh/v1/NodePool a100: not found"
)]
#[case::list_not_found(
    ClusterRequest::ListAll(crate::cluster::ListAll { api_version: "karpenter.sh/v1".into(), kind: "NodePool".into(), label_selector: None, field_selector: None, field_masks: None }),
    "ApiError: the server could not find the requested resource: NotFound (ErrorResponse { code: 404 })",
    "cannot list karpenter.sh/v1/NodePool: not found: the API server serves no NodePool in karpenter.sh/v1 (is its CustomResourceDefinition installed?)"
)]
#[case::node_pool_forbidden(
    node_pool_query("a100"),
    "nodepools.karpenter.sh \"a100\" is forbidden",
    "cannot get karpenter.sh/v1/NodePool a100: forbidden by RBAC: grant the policy-server's ServiceAccount get on nodepools (apiGroup karpenter.sh)"
)]
#[case::node_pool_not_granted(
    node_pool_query("a100"),
    "Policy has not been granted access to Kubernetes karpenter.sh/v1/NodePool resources. The violation has been reported.",
    "cannot get karpenter.sh/v1/NodePool a100: not granted to this policy: add {apiVersion: karpenter.sh/v1, kind: NodePool} to the ClusterAdmissionPolicy's contextAwareResources"
)]
#[case::namespaced_list(
    ClusterRequest::ListInNamespace(ListInNamespace { api_version: "apps/v1".into(), kind: "Deployment".into(), namespace: "ml".into(), label_selector: None, field_selector: None, field_masks: None }),
    "has not been granted access",
    "cannot list apps/v1/Deployment: not granted to this policy: add {apiVersion: apps/v1, kind: Deployment} to the ClusterAdmissionPolicy's contextAwareResources"
)]
#[case::other(
    node_query(&pool()),
    "the list of recorded responses is empty",
    "cannot list v1/Node: add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy's contextAwareResources and grant the policy-server's ServiceAccount list and watch on nodes"
)]
fn failures_name_their_class_and_what_to_change(
    #[case] request: ClusterRequest,
    #[case] raw: &str,
    #[case] explanation: &str,
) {
    explains(request, raw, explanation);
}

/// Asserts that the failure of `request` with `raw` explains itself as `explanation` and
/// keeps `raw`.
#[track_caller]
fn explains(request: ClusterRequest, raw: &str, explanation: &str) {
    let f = failure(request, raw);
    assert_eq!(f.explanation(), explanation);
    assert_eq!(f.raw(10_000), raw);
}

/// The message of each class that passes (the API server unreachable, slow or failing):
/// what could not be done, the class in the words other suites match, and that the next
/// request retries.
#[rstest]
#[case::refused(
    "ServiceError: client error (Connect) Caused by: 0: client error (Connect) 1: tcp connect error 2: Connection refused (os error 111)",
    "API server unreachable (connection refused)"
)]
#[case::dns(
    "dns error: failed to lookup address information",
    "API server unreachable (its name does not resolve)"
)]
#[case::reset(
    "connection reset by peer",
    "API server unreachable (connection reset)"
)]
#[case::timed_out("operation timed out", "API server timed out")]
#[case::server_error(
    "ApiError: etcdserver: leader changed: InternalError (ErrorResponse { status: \"Failure\", message: \"etcdserver: leader changed\", reason: \"InternalError\", code: 500 })",
    "API server error (HTTP 500)"
)]
#[case::throttled(
    "ApiError: Too many requests: TooManyRequests (ErrorResponse { code: 429 })",
    "API server error (HTTP 429, too many requests)"
)]
fn passing_failures_say_the_next_request_retries(#[case] raw: &str, #[case] class: &str) {
    explains(
        node_query(&pool()),
        raw,
        &format!(
            "cannot list v1/Node: {class}: policy-server could not read the cluster; the next request retries"
        ),
    );
}

#[test]
fn unreadable_answers_say_why() {
    let f = HostFailure {
        request: Box::new(node_query(&pool())),
        error: HostError::Unreadable("expected value at line 1 column 1".into()),
    };
    assert_eq!(f.class(), FailureClass::Unreadable);
    assert_eq!(
        f.explanation(),
        "cannot list v1/Node: the answer could not be read (expected value at line 1 column 1)"
    );
}

#[test]
fn the_wapc_prefix_is_dropped() {
    struct Failing;
    impl Cluster for Failing {
        fn call(&self, _: &ClusterRequest) -> Result<Vec<u8>, String> {
            Err(
                "Host error: Policy has not been granted access to Kubernetes v1/Node resources."
                    .into(),
            )
        }
    }
    let f = call(&Failing, &node_query(&pool())).unwrap_err();
    assert_eq!(
        f.error,
        HostError::Call(
            "Policy has not been granted access to Kubernetes v1/Node resources.".into()
        )
    );
    assert_eq!(f.class(), FailureClass::NotGranted);
}

#[test]
fn raw_errors_are_one_line_without_the_backtrace() {
    assert_eq!(
        failure(node_query(&pool()), REFUSED).raw(HOST_ERROR_MAX),
        "Callback evaluation failure: ServiceError: client error (Connect) Caused by: 0: client error (Connect) 1: tcp connect error 2: Connection refused (os error 111)"
    );
}

#[test]
fn raw_errors_are_truncated_at_a_character_boundary() {
    let f = failure(node_query(&pool()), "ééééé");
    assert_eq!(f.raw(5), "éé...");
    assert_eq!(f.raw(4), "éé...");
    assert_eq!(f.raw(100), "ééééé");
}
