//! A host call that failed, the class of failure its text shows, and the sentence that
//! says what to change: one wording for every policy that reads the cluster.
//!
//! The classes, the host's text for each (kwctl 1.36 measured against an API server
//! stub answering each status, a refusing port and an unknown host name; policy-server 1.36
//! shares the callback handler), and the words each message says (other test suites match
//! them):
//!
//! | class | the host's text | message |
//! |---|---|---|
//! | [`FailureClass::NotGranted`] | `Policy has not been granted access to Kubernetes <apiVersion>/<kind> resources. The violation has been reported.` | `not granted to this policy: add {apiVersion, kind} to ... contextAwareResources` |
//! | [`FailureClass::Forbidden`] | `ApiError: <plural> is forbidden: User ... : Forbidden (Status { ... code: 403 ... })` | `forbidden by RBAC: grant the policy-server's ServiceAccount <verbs> on <plural>` |
//! | [`FailureClass::NotFound`] | `Cannot find <apiVersion>/<kind> named '<name>' inside of namespace '...'` (a 404 on `get_resource`) | `not found` |
//! | [`FailureClass::Unreachable`] | `ServiceError: client error (Connect)` caused by `tcp connect error` / `Connection refused (os error 111)`, or `dns error` / `failed to lookup address information`; `client error (SendRequest)` caused by `Connection reset by peer` | `API server unreachable (connection refused)`, `(its name does not resolve)`, `(connection reset)` |
//! | [`FailureClass::TimedOut`] | `client error (SendRequest)` caused by `connection error` / `timed out` (an API server that accepts and never answers: after 295 s, kube's read timeout) | `API server timed out` |
//! | [`FailureClass::ServerError`] | `ApiError: ...: InternalError (Status { ... code: 500 ... })`, `TooManyRequests (... code: 429 ...)`, a non-JSON body `Failed to parse error data (... code: 502 ...)` | `API server error (HTTP <status>)` |
//!
//! Every text starts with `Callback evaluation failure: `; with `RUST_BACKTRACE` set the
//! host appends a stack backtrace. `get_resource` returns every class at once. A list
//! (`list_resources_all`, `list_resources_by_namespace`) is served by the host's watch
//! cache: when the API server cannot be reached (refused, DNS), the first list of a kind
//! fails at once, but a list of a kind the host already watches, with a label or field
//! selector it has not seen, is held by policy-server (its reflector retries) rather than
//! failed; when the API server answers with an error status (403, 404, 429, 5xx) or resets
//! the connection, the host's reflector retries and the call waits until the policy's
//! evaluation deadline.
//!
//! A text of none of these classes (a replay session's own errors) keeps the two things
//! to check, the grant in the policy and the RBAC permission. The raw text goes to the
//! policy's `host-error` audit annotation, shortened ([`HostFailure::raw`]).

use super::{Cluster, ClusterRequest};

/// Longest host error kept in a `host-error` audit annotation.
pub const HOST_ERROR_MAX: usize = 512;

/// A host call that failed, or whose answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFailure {
    /// Boxed: failures travel in `Result`s and are rare.
    pub request: Box<ClusterRequest>,
    pub error: HostError,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostError {
    /// The host refused or failed the call (its text, possibly long).
    Call(String),
    /// The host answered, but not with what was asked for.
    Unreadable(String),
}

/// What kind of failure a host's error text shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// The policy's `contextAwareResources` do not list the kind.
    NotGranted,
    /// The API server refused the policy-server's ServiceAccount (HTTP 403).
    Forbidden,
    /// The object (or the kind) does not exist (HTTP 404).
    NotFound,
    /// The API server could not be reached: connection refused, DNS, reset.
    Unreachable(Unreachable),
    /// The API server did not answer in time.
    TimedOut,
    /// The API server answered with an error status (5xx, 429); the status when the text
    /// gives it.
    ServerError(Option<u16>),
    /// The answer came but could not be read.
    Unreadable,
    /// A text of no known class.
    Other,
}

/// How the API server could not be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreachable {
    ConnectionRefused,
    Dns,
    ConnectionReset,
    /// Some other failure to connect.
    Connect,
}

impl Unreachable {
    fn text(self) -> &'static str {
        match self {
            Unreachable::ConnectionRefused => "connection refused",
            Unreachable::Dns => "its name does not resolve",
            Unreachable::ConnectionReset => "connection reset",
            Unreachable::Connect => "cannot connect",
        }
    }
}

/// Makes `request` and returns the raw answer. The waPC guest library prefixes host
/// errors with `Host error: `; that prefix is dropped.
pub fn call(cluster: &dyn Cluster, request: &ClusterRequest) -> Result<Vec<u8>, HostFailure> {
    cluster.call(request).map_err(|e| HostFailure {
        request: Box::new(request.clone()),
        error: HostError::Call(match e.strip_prefix("Host error: ") {
            Some(rest) => rest.to_string(),
            None => e,
        }),
    })
}

/// The class of a host's error text.
pub fn classify(raw: &str) -> FailureClass {
    let lower = raw.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    if has(&["has not been granted access"]) {
        return FailureClass::NotGranted;
    }
    let status = http_status(&lower);
    if status == Some(403) || has(&["forbidden"]) {
        return FailureClass::Forbidden;
    }
    if status == Some(404)
        || has(&[
            "cannot find ",
            "not found",
            "notfound",
            "could not find the requested resource",
        ])
    {
        return FailureClass::NotFound;
    }
    if let Some(status @ (429 | 500..=599)) = status {
        return FailureClass::ServerError(Some(status));
    }
    WORDS
        .iter()
        .find(|(words, _)| has(words))
        .map_or(FailureClass::Other, |&(_, class)| class)
}

/// The classes a host's error text shows by its words alone, in the order they are
/// tried (after the grant, 403, 404 and the status a text gives).
const WORDS: &[(&[&str], FailureClass)] = &[
    (
        &["too many requests", "toomanyrequests"],
        FailureClass::ServerError(Some(429)),
    ),
    (
        &[
            "timed out",
            "timeout",
            "deadline has elapsed",
            "deadline exceeded",
        ],
        FailureClass::TimedOut,
    ),
    (
        &["connection refused"],
        FailureClass::Unreachable(Unreachable::ConnectionRefused),
    ),
    (
        &[
            "dns error",
            "failed to lookup address",
            "name or service not known",
            "no such host",
            "temporary failure in name resolution",
        ],
        FailureClass::Unreachable(Unreachable::Dns),
    ),
    (
        &[
            "connection reset",
            "broken pipe",
            "connection closed",
            "unexpected eof",
        ],
        FailureClass::Unreachable(Unreachable::ConnectionReset),
    ),
    (
        &[
            "error trying to connect",
            "tcp connect error",
            "client error (connect)",
            "network is unreachable",
            "no route to host",
        ],
        FailureClass::Unreachable(Unreachable::Connect),
    ),
    (
        &[
            "internal error",
            "internalerror",
            "service unavailable",
            "serviceunavailable",
        ],
        FailureClass::ServerError(None),
    ),
];

/// The HTTP status a host's error text gives: kube-rs's `code: 503` in its error
/// response, or `HTTP 503` / `status 503` / `status code 503`.
fn http_status(lower: &str) -> Option<u16> {
    for marker in ["code: ", "http ", "status code ", "status: ", "status "] {
        let mut rest = lower;
        while let Some(at) = rest.find(marker) {
            rest = &rest[at + marker.len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if digits.len() == 3
                && let Ok(n) = digits.parse::<u16>()
                && (400..600).contains(&n)
            {
                return Some(n);
            }
        }
    }
    None
}

impl HostFailure {
    /// The class of the failure.
    pub fn class(&self) -> FailureClass {
        match &self.error {
            HostError::Unreadable(_) => FailureClass::Unreadable,
            HostError::Call(raw) => classify(raw),
        }
    }

    /// What the policy could not do, the class of failure, and what to change, without
    /// the raw host text: `cannot list v1/Node: not granted to this policy: add
    /// {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy's contextAwareResources`.
    pub fn explanation(&self) -> String {
        let (verb, what) = match self.request.as_ref() {
            ClusterRequest::Get(g) => (
                "get",
                match &g.namespace {
                    Some(namespace) => {
                        format!("{}/{} {namespace}/{}", g.api_version, g.kind, g.name)
                    }
                    None => format!("{}/{} {}", g.api_version, g.kind, g.name),
                },
            ),
            ClusterRequest::ListAll(_) | ClusterRequest::ListInNamespace(_) => {
                ("list", self.request.what())
            }
        };
        format!("cannot {verb} {what}: {}", self.reason())
    }

    /// The class of failure and what to change, for a message that already names what was
    /// read: `not granted to this policy: add {apiVersion: v1, kind: Node} to the
    /// ClusterAdmissionPolicy's contextAwareResources`, `not found`, `forbidden by RBAC: ...`.
    pub fn reason(&self) -> String {
        let rbac_verbs = match self.request.as_ref() {
            ClusterRequest::Get(_) => "get",
            ClusterRequest::ListAll(_) | ClusterRequest::ListInNamespace(_) => "list and watch",
        };
        let (api_version, kind) = api_version_kind(&self.request);
        let group = api_version.rsplit_once('/').map(|(g, _)| g);
        let plural = format!("{}s", kind.to_ascii_lowercase());
        let on = match group {
            Some(g) => format!("{plural} (apiGroup {g})"),
            None => plural,
        };
        let context_aware = format!(
            "add {{apiVersion: {api_version}, kind: {kind}}} to the ClusterAdmissionPolicy's contextAwareResources"
        );
        let rbac = format!("grant the policy-server's ServiceAccount {rbac_verbs} on {on}");
        let reach = "policy-server could not read the cluster; the next request retries";
        match self.class() {
            FailureClass::Unreadable => {
                let (HostError::Unreadable(e) | HostError::Call(e)) = &self.error;
                format!("the answer could not be read ({e})")
            }
            FailureClass::NotGranted => format!("not granted to this policy: {context_aware}"),
            FailureClass::Forbidden => format!("forbidden by RBAC: {rbac}"),
            FailureClass::NotFound => match self.request.as_ref() {
                ClusterRequest::Get(_) => "not found".to_string(),
                _ => format!(
                    "not found: the API server serves no {kind} in {api_version} (is its CustomResourceDefinition installed?)"
                ),
            },
            FailureClass::Unreachable(how) => {
                format!("API server unreachable ({}): {reach}", how.text())
            }
            FailureClass::TimedOut => format!("API server timed out: {reach}"),
            FailureClass::ServerError(Some(429)) => {
                format!("API server error (HTTP 429, too many requests): {reach}")
            }
            FailureClass::ServerError(Some(status)) => {
                format!("API server error (HTTP {status}): {reach}")
            }
            FailureClass::ServerError(None) => format!("API server error: {reach}"),
            FailureClass::Other => format!("{context_aware} and {rbac}"),
        }
    }

    /// The host's own text on one line (whitespace runs as one space, without the stack
    /// backtrace the host appends when `RUST_BACKTRACE` is set), cut to `max` bytes (at a
    /// character boundary), for an audit annotation.
    pub fn raw(&self, max: usize) -> String {
        let text = match &self.error {
            HostError::Call(s) | HostError::Unreadable(s) => s.as_str(),
        };
        let text = text.split("Stack backtrace:").next().unwrap_or_default();
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.len() <= max {
            return text;
        }
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &text[..end])
    }
}

/// The host's error, short: its first line without the prefixes waPC (`Host error: `) and
/// policy-evaluator (`Callback evaluation failure: `) put before the reason, at most 200
/// characters.
pub fn short_error(error: &str) -> String {
    let line = error.lines().next().unwrap_or("").trim();
    let line = line.strip_prefix("Host error: ").unwrap_or(line);
    let line = line
        .strip_prefix("Callback evaluation failure: ")
        .unwrap_or(line);
    match line.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line.to_string(),
    }
}

fn api_version_kind(request: &ClusterRequest) -> (&str, &str) {
    match request {
        ClusterRequest::Get(r) => (&r.api_version, &r.kind),
        ClusterRequest::ListAll(r) => (&r.api_version, &r.kind),
        ClusterRequest::ListInNamespace(r) => (&r.api_version, &r.kind),
    }
}

#[cfg(test)]
mod tests;
