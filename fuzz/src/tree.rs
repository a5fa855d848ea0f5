//! Structure-aware JSON for the fuzz targets: arbitrary trees whose keys and strings come
//! from the vocabulary the rules read, and edits that corrupt a realistic document in place
//! (wrong types, deep nesting, long arrays, missing or duplicated fields).

use arbitrary::Arbitrary;
use serde_json::{Map, Number, Value, json};

/// Object keys: what the rules, the admission request and the settings of the five policies
/// look at, so generated trees reach the code behind them.
pub const KEYS: &[&str] = &[
    // Kubernetes objects and pod templates.
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "ownerReferences",
    "controller",
    "uid",
    "deletionTimestamp",
    "generateName",
    "spec",
    "template",
    "containers",
    "initContainers",
    "ephemeralContainers",
    "resources",
    "limits",
    "requests",
    "claims",
    "replicas",
    "parallelism",
    "completions",
    "jobTemplate",
    "selector",
    "matchLabels",
    "matchExpressions",
    "key",
    "operator",
    "values",
    "value",
    "effect",
    "tolerationSeconds",
    "nodeSelector",
    "tolerations",
    "affinity",
    "nodeAffinity",
    "requiredDuringSchedulingIgnoredDuringExecution",
    "nodeSelectorTerms",
    "matchFields",
    "preferredDuringSchedulingIgnoredDuringExecution",
    "priorityClassName",
    "priority",
    "restartPolicy",
    "runtimeClassName",
    "nodeName",
    "schedulerName",
    "image",
    "args",
    "env",
    "status",
    "allocatable",
    "capacity",
    "taints",
    "unschedulable",
    "items",
    "phase",
    "data",
    // Workload kinds the presets read.
    "predictor",
    "model",
    "storageUri",
    "modelFormat",
    "workerSpec",
    "pipelineParallelSize",
    "tensorParallelSize",
    "minReplicas",
    "maxReplicas",
    "leaderWorkerTemplate",
    "leaderTemplate",
    "workerTemplate",
    "size",
    "headGroupSpec",
    "workerGroupSpecs",
    "groupName",
    "pytorchReplicaSpecs",
    "Master",
    "Worker",
    "rayClusterSpec",
    "nvidia.com/gpu",
    "nvidia.com/mig-3g.40gb",
    "nvidia.com/mig-1g.10gb",
    "amd.com/gpu",
    "nvidia.com/gpu.shared",
    "gpu.intel.com/xe",
    "cpu",
    "memory",
    "gpu-admission/pool",
    "gpu-admission/team",
    "gpu-admission/workload-type",
    "gpu-admission/model",
    "gpu-admission/cost-center",
    "nvidia.com/gpu.product",
    "nvidia.com/mig.strategy",
    "nvidia.com/gpu.sharing-strategy",
    "workload-type",
    "team",
    "app",
    "serving.kserve.io/deploymentMode",
    // The admission request.
    "request",
    "settings",
    "operation",
    "object",
    "oldObject",
    "userInfo",
    "username",
    "groups",
    "subResource",
    "resource",
    "group",
    "version",
    "dryRun",
    // Settings of the four policies.
    "requiredLabels",
    "allowedValues",
    "pattern",
    "requireGpuLimits",
    "requireRequestsEqualLimits",
    "requireWholeGpus",
    "requireCpuAndMemoryRequests",
    "maxGpusPerPod",
    "maxGpusPerContainer",
    "denyNonGpuPodsOnGpuNodes",
    "gpuNodeLabelKeys",
    "gpuTaints",
    "allowDaemonSetsOnGpuNodes",
    "extraGpuResources",
    "customKinds",
    "exemptNamespaces",
    "templates",
    "path",
    "podSpec",
    "default",
    "subtract",
    "atLeast",
    "poolLabelKey",
    "pools",
    "defaultPool",
    "namespaces",
    "allowedPriorityClasses",
    "requiredNodeAffinity",
    "modelLabelKey",
    "modelAnnotationKey",
    "models",
    "modelRegistry",
    "gpuProducts",
    "migProfiles",
    "productLabelKey",
    "poolProducts",
    "usableMemoryPercent",
    "suggestProducts",
    "unknownGpu",
    "unknownModel",
    "noModel",
    "modelMemoryCaps",
    "labelKey",
    "maxGiB",
    "vramGiB",
    "parametersBillions",
    "dtype",
    "layers",
    "kvHeads",
    "headDim",
    "contextLength",
    "attentionHeads",
    "aliases",
    "requestedMemoryCaps",
    "message",
    "modelMismatch",
    "overprovision",
    "imageLabels",
    "enabled",
    "modelKey",
    "vramGiBKey",
    // What a model server's container runs.
    "image",
    "command",
    "args",
    "env",
    "value",
    "valueFrom",
    "chargePods",
    "failOpen",
    "exemptPriorityClasses",
    "thresholdPercent",
    // Autoscalers, and the autoscaler policy's settings.
    "scaleTargetRef",
    "maxReplicas",
    "minReplicas",
    "metrics",
    "type",
    "external",
    "metric",
    "containerResource",
    "targetCPUUtilizationPercentage",
    "maxReplicaCount",
    "minReplicaCount",
    "triggers",
    "fallback",
    "jobTargetRef",
    "usage",
    "namespaceMaxGpus",
    "maxGpus",
    "defaultMaxGpus",
    "resourceMetricsOnly",
    "resourceTriggersOnly",
    // Serving and training hygiene (gpu-labels-policy workloadRules).
    "workloadRules",
    "workloadTypes",
    "readinessProbe",
    "startupProbe",
    "failureThreshold",
    "periodSeconds",
    "minFailureBudgetSeconds",
    "strategy",
    "rollingUpdate",
    "maxUnavailable",
    "maxSurge",
    "activeDeadline",
    "activeDeadlineSeconds",
    "maxSeconds",
    "sharedMemory",
    "minSize",
    "minGpus",
    "volumes",
    "volumeMounts",
    "mountPath",
    "emptyDir",
    "medium",
    "sizeLimit",
    // New keys go last: the kept corpus's indices below the earlier length still decode to
    // the same keys.
    "unreadableCluster",
];

/// String values the rules compare against.
pub const WORDS: &[&str] = &[
    "",
    "v1",
    "apps/v1",
    "batch/v1",
    "Pod",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
    "CronJob",
    "InferenceService",
    "LeaderWorkerSet",
    "RayCluster",
    "PyTorchJob",
    "ConfigMap",
    "Node",
    "CREATE",
    "UPDATE",
    "DELETE",
    "CONNECT",
    "scale",
    "status",
    "deployments",
    "statefulsets",
    "replicasets",
    "apps",
    "batch",
    "serving.kserve.io",
    "nvidia.com/gpu",
    "nvidia.com/mig-3g.40gb",
    "amd.com/gpu",
    "a100",
    "h100",
    "l4-shared",
    "a100-mig",
    "batch",
    "interactive",
    "training",
    "ml",
    "ml-serving",
    "kube-system",
    "gpu-operator",
    "Always",
    "OnFailure",
    "Exists",
    "Equal",
    "In",
    "NotIn",
    "DoesNotExist",
    "Gt",
    "Lt",
    "NoSchedule",
    "NoExecute",
    "PreferNoSchedule",
    "NVIDIA-A100-SXM4-80GB",
    "NVIDIA-H100-80GB-HBM3",
    "NVIDIA-L4",
    "NVIDIA-A10G",
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-70B-Instruct",
    "hf://meta-llama/Llama-3.1-70B-Instruct",
    "s3://models/llama-3.1-8b",
    "pvc://m/x",
    "bf16",
    "fp8",
    "int4",
    "deny",
    "warn",
    "allow",
    "none",
    "ownerless",
    "all",
    "true",
    "false",
    "$.spec.predictor",
    "$.spec.template",
    "spec.template",
    "$",
    "$..spec",
    "$.spec.workerGroupSpecs[*].template",
    "high-priority",
    "gpu-system",
    "gpu-models",
    "models.yaml",
    "models.json",
    "--model",
    "--max-model-len",
    "--max-num-seqs=64",
    "--tensor-parallel-size",
    "--gpu-memory-utilization=0.95",
    "vllm",
    "serve",
    "/bin/sh",
    "-c",
    "$(MAX_LEN)",
    "io.gpu-admission.model",
    "io.gpu-admission.vram-gib",
    "1",
    "0",
    "-1",
    "0.5",
    "8Gi",
    "1e3",
    "2Ei",
    "100m",
    "9223372036854775807",
    "18446744073709551616",
    "NaN",
    "1e308",
    "system:masters",
    "gpu-admission/pool",
    "workload-type",
    "team",
    "*",
    "a*",
    "?",
    "\u{0}",
    "é",
    "—",
    // Autoscalers and rollouts.
    "autoscaling/v2",
    "keda.sh/v1alpha1",
    "HorizontalPodAutoscaler",
    "ScaledObject",
    "ScaledJob",
    "Resource",
    "ContainerResource",
    "External",
    "Pods",
    "prometheus",
    "cpu",
    "memory",
    "Memory",
    "/dev/shm",
    "RollingUpdate",
    "Recreate",
    "25%",
    // DRA claims, device access, fractional GPUs.
    "resourceClaims",
    "resourceClaimTemplateName",
    "resourceClaimName",
    "ResourceClaimTemplate",
    "ResourceClaim",
    "resource.k8s.io/v1",
    "devices",
    "requests",
    "exactly",
    "firstAvailable",
    "deviceClassName",
    "gpu.nvidia.com",
    "mig.nvidia.com",
    "allocationMode",
    "ExactCount",
    "All",
    "count",
    "selectors",
    "cel",
    "expression",
    "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
    "securityContext",
    "privileged",
    "volumes",
    "hostPath",
    "/dev/nvidia0",
    "env",
    "envFrom",
    "valueFrom",
    "NVIDIA_VISIBLE_DEVICES",
    "all",
    "runtimeClassName",
    "nvidia",
    "schedulerName",
    "kai-scheduler",
    "gpu-fraction",
    "gpu-memory",
    "nvidia.com/gpumem",
];

/// An arbitrary JSON tree. Strings are mostly vocabulary words; object keys always are.
#[derive(Arbitrary, Debug, Clone)]
pub enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Quantity(Qty),
    Word(u16),
    Text(String),
    Array(Vec<Node>),
    Object(Vec<(u16, Node)>),
    /// `n` copies of one item: long arrays without long inputs.
    Repeat(u16, Box<Node>),
    /// The item wrapped in `n` arrays or objects: deep nesting.
    Deep(u8, bool, Box<Node>),
}

/// A Kubernetes quantity, usually well formed, sometimes not.
#[derive(Arbitrary, Debug, Clone)]
pub enum Qty {
    Int(u32),
    Suffixed(u16, u8),
    Decimal(u16, u16, u8),
    Big(u64, u8),
    Number(i64),
    Text(String),
}

const SUFFIXES: &[&str] = &[
    "", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e3", "E6", "e-9",
    "u", "n", ".", "e", "i",
];

impl Qty {
    pub fn to_json(&self) -> Value {
        let suffix = |s: &u8| SUFFIXES[usize::from(*s) % SUFFIXES.len()];
        match self {
            Qty::Int(n) => json!(n.to_string()),
            Qty::Suffixed(n, s) => json!(format!("{n}{}", suffix(s))),
            Qty::Decimal(a, b, s) => json!(format!("{a}.{b}{}", suffix(s))),
            Qty::Big(n, s) => json!(format!("{n}{}", suffix(s))),
            Qty::Number(n) => json!(n),
            Qty::Text(t) => json!(t),
        }
    }
}

/// A vocabulary word by index.
pub fn word(i: u16) -> &'static str {
    WORDS[usize::from(i) % WORDS.len()]
}

/// A key by index.
pub fn key(i: u16) -> &'static str {
    KEYS[usize::from(i) % KEYS.len()]
}

/// Most JSON values one generated input may hold (payload and host answers together), so
/// nested repeats stay small and each run fast. Long arrays still reach thousands of items.
pub const BUDGET: usize = 10_000;

/// Builds JSON from trees, within a shared budget of values.
pub struct Builder {
    pub left: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder { left: BUDGET }
    }
}

impl Builder {
    /// The JSON of `node` (`null` once the budget is spent).
    pub fn json(&mut self, node: &Node) -> Value {
        self.build(node, 0)
    }

    fn build(&mut self, node: &Node, depth: u32) -> Value {
        if self.left == 0 || depth > 40 {
            return Value::Null;
        }
        self.left -= 1;
        match node {
            Node::Null => Value::Null,
            Node::Bool(b) => json!(b),
            Node::Int(i) => json!(i),
            Node::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Node::Quantity(q) => q.to_json(),
            Node::Word(w) => json!(word(*w)),
            Node::Text(s) => json!(s),
            Node::Array(items) => {
                Value::Array(items.iter().map(|n| self.build(n, depth + 1)).collect())
            }
            Node::Object(fields) => {
                let mut map = Map::new();
                for (k, v) in fields {
                    let v = self.build(v, depth + 1);
                    map.insert(key(*k).to_string(), v);
                }
                Value::Object(map)
            }
            Node::Repeat(n, item) => {
                let item = self.build(item, depth + 1);
                let size = count(&item).max(1);
                let n = (usize::from(*n) % 4096).min(self.left / size);
                self.left -= n * size;
                Value::Array(vec![item; n])
            }
            Node::Deep(levels, objects, item) => {
                let mut v = self.build(item, depth + 1);
                let levels = deep_levels(*levels).min(self.left);
                self.left -= levels;
                for i in 0..levels {
                    v = wrap(v, i, *objects);
                }
                v
            }
        }
    }
}

/// An object of `fields`, moved in (`json!` would copy each value through its serializer).
pub fn object<'a>(fields: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
    Value::Object(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// `v` one level deeper: `[v]`, or `{key: v}` with the `i`-th vocabulary key.
fn wrap(v: Value, i: usize, in_object: bool) -> Value {
    if in_object {
        object([(key(i as u16), v)])
    } else {
        Value::Array(vec![v])
    }
}

/// Levels of added nesting: up to and just past serde_json's recursion limit (128).
fn deep_levels(n: u8) -> usize {
    usize::from(n) % 132
}

/// How many values `v` holds (itself included).
pub fn count(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(count).sum::<usize>(),
        Value::Object(m) => 1 + m.values().map(count).sum::<usize>(),
        _ => 1,
    }
}

/// One change to a document: follow `path`, then apply `op` there.
#[derive(Arbitrary, Debug, Clone)]
pub struct Edit {
    pub path: Vec<Step>,
    pub op: Op,
}

/// A step down a document.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Step {
    /// The n-th field of an object or item of an array (modulo its length).
    Nth(u8),
    /// A vocabulary key of an object, created (as `null`) when missing.
    Key(u16),
}

/// What an edit does where it lands.
#[derive(Arbitrary, Debug, Clone)]
pub enum Op {
    Set(Node),
    Remove,
    /// The value becomes an array of `n` copies of itself.
    Repeat(u16),
    /// The value is wrapped in `n` arrays or objects.
    Deep(u8, bool),
    /// A number becomes a string and a string (or bool) becomes a number, when it can.
    Retype,
    /// `{}`, `[]` or `""` of the value's kind.
    Empty,
}

/// Applies `edits` to `doc` in order, within the builder's budget.
pub fn apply_all(doc: &mut Value, edits: &[Edit], builder: &mut Builder) {
    for edit in edits {
        apply(doc, &edit.path, &edit.op, builder);
    }
}

fn apply(v: &mut Value, path: &[Step], op: &Op, builder: &mut Builder) {
    let Some((step, rest)) = path.split_first() else {
        change(v, op, builder);
        return;
    };
    let is_last = rest.is_empty();
    match (v, *step) {
        (Value::Object(map), Step::Nth(n)) if !map.is_empty() => {
            let k = map
                .keys()
                .nth(usize::from(n) % map.len())
                .cloned()
                .unwrap_or_default();
            if is_last && matches!(op, Op::Remove) {
                map.remove(&k);
            } else if let Some(child) = map.get_mut(&k) {
                apply(child, rest, op, builder);
            }
        }
        (Value::Array(items), Step::Nth(n)) if !items.is_empty() => {
            let i = usize::from(n) % items.len();
            if is_last && matches!(op, Op::Remove) {
                items.remove(i);
            } else {
                apply(&mut items[i], rest, op, builder);
            }
        }
        (Value::Object(map), Step::Key(k)) => {
            let k = key(k);
            if is_last && matches!(op, Op::Remove) {
                map.remove(k);
            } else {
                apply(
                    map.entry(k.to_string()).or_insert(Value::Null),
                    rest,
                    op,
                    builder,
                );
            }
        }
        // A path that leads nowhere applies the change where it stopped.
        (v, _) => change(v, op, builder),
    }
}

fn change(v: &mut Value, op: &Op, builder: &mut Builder) {
    match op {
        Op::Set(node) => *v = builder.json(node),
        Op::Remove => *v = Value::Null,
        Op::Repeat(n) => {
            let size = count(v).max(1);
            let n = (usize::from(*n) % 4096).min(builder.left / size);
            builder.left -= n * size;
            *v = Value::Array(vec![v.take(); n]);
        }
        Op::Deep(levels, objects) => {
            let levels = deep_levels(*levels).min(builder.left);
            builder.left -= levels;
            for i in 0..levels {
                *v = wrap(v.take(), i, *objects);
            }
        }
        Op::Retype => {
            *v = match v.take() {
                Value::Number(n) => json!(n.to_string()),
                Value::String(s) => s
                    .parse::<i64>()
                    .map(Value::from)
                    .or_else(|_| s.parse::<f64>().map(|f| json!(f)))
                    .unwrap_or(json!(true)),
                Value::Bool(b) => json!(u8::from(b)),
                Value::Null => json!(0),
                Value::Array(mut a) => a.pop().unwrap_or(Value::Null),
                Value::Object(m) => Value::Array(m.into_iter().map(|(_, v)| v).collect()),
            }
        }
        Op::Empty => {
            *v = match v {
                Value::Object(_) => json!({}),
                Value::Array(_) => json!([]),
                _ => json!(""),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_stay_within_the_budget() {
        let mut b = Builder { left: 1000 };
        let deep = Node::Repeat(4000, Box::new(Node::Repeat(4000, Box::new(Node::Int(1)))));
        let v = b.json(&deep);
        assert!(count(&v) <= 1001, "{}", count(&v));
    }

    #[test]
    fn edits_follow_paths_and_change_types() {
        let mut doc = json!({"spec": {"replicas": 3, "template": {}}});
        let spec = KEYS.iter().position(|k| *k == "spec").unwrap() as u16;
        let replicas = KEYS.iter().position(|k| *k == "replicas").unwrap() as u16;
        let edits = [Edit {
            path: vec![Step::Key(spec), Step::Key(replicas)],
            op: Op::Retype,
        }];
        apply_all(&mut doc, &edits, &mut Builder::default());
        assert_eq!(doc["spec"]["replicas"], "3");
    }
}
