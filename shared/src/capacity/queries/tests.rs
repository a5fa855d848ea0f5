use super::*;
use crate::pools::fixtures::pool;

#[test]
fn pod_query_is_exact() {
    let ClusterRequest::ListAll(q) = pod_query("gpu-admission/pool", &pool()) else {
        panic!("not a list_resources_all");
    };
    assert_eq!((q.api_version.as_str(), q.kind.as_str()), ("v1", "Pod"));
    assert_eq!(q.label_selector.as_deref(), Some("gpu-admission/pool=a100"));
    assert_eq!(
        q.field_selector.as_deref(),
        Some("status.phase!=Succeeded,status.phase!=Failed")
    );
    assert_eq!(
        q.field_masks.unwrap().into_iter().collect::<Vec<_>>(),
        vec![
            "spec.containers.resources",
            "spec.ephemeralContainers.resources",
            "spec.initContainers.resources",
            "spec.initContainers.restartPolicy",
            "spec.nodeName",
            "spec.resources"
        ]
    );
}

#[test]
fn parent_query_is_exact() {
    assert_eq!(
        String::from_utf8(parent_query("apps/v1", "Deployment", "llama", "ml").payload()).unwrap(),
        r#"{"api_version":"apps/v1","kind":"Deployment","name":"llama","namespace":"ml","disable_cache":false,"field_masks":["spec.template.metadata.annotations.gpu-fraction","spec.template.metadata.annotations.gpu-fraction-num-devices","spec.template.metadata.annotations.gpu-memory","spec.template.metadata.labels","spec.template.spec.affinity.nodeAffinity","spec.template.spec.containers.resources","spec.template.spec.ephemeralContainers.resources","spec.template.spec.initContainers.resources","spec.template.spec.initContainers.restartPolicy","spec.template.spec.nodeSelector","spec.template.spec.priorityClassName","spec.template.spec.resourceClaims","spec.template.spec.resources","spec.template.spec.schedulerName"]}"#
    );
}

#[test]
fn team_and_namespace_queries_are_exact() {
    assert_eq!(
        String::from_utf8(namespace_quota_query("ml").payload()).unwrap(),
        r#"{"api_version":"v1","kind":"ResourceQuota","namespace":"ml","label_selector":null,"field_selector":null,"field_masks":["metadata.name","spec.hard","spec.scopeSelector","spec.scopes","status.used"]}"#
    );
    assert_eq!(
        namespace_quota_query("ml").operation(),
        "list_resources_by_namespace"
    );
    let team = String::from_utf8(team_pod_query("ml-a").payload()).unwrap();
    assert!(
        team.starts_with(r#"{"api_version":"v1","kind":"Pod","label_selector":"gpu-admission/team=ml-a","field_selector":"status.phase!=Succeeded,status.phase!=Failed","field_masks":["spec.containers.resources""#),
        "{team}"
    );
    let ns = String::from_utf8(namespace_pod_query("ml-dev").payload()).unwrap();
    assert!(
        ns.starts_with(r#"{"api_version":"v1","kind":"Pod","namespace":"ml-dev","label_selector":null,"field_selector":"status.phase!=Succeeded,status.phase!=Failed""#),
        "{ns}"
    );
}
