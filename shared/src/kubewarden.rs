//! waPC glue (feature `kubewarden`): parse the payload, run a rule, answer in
//! Kubewarden's format. Policies register these and hold no logic of their own.
//!
//! A payload that cannot be read is *rejected with a message* (code 400), never turned
//! into a 500 "internal server error": with `failurePolicy: Fail` a 500 blocks every
//! deploy, with `Ignore` it lets everything through. A payload over the limits of
//! [`crate::limits`] is rejected before it is parsed (code 413). Messages about a field
//! name it (`settings.pools[0].name: invalid type...`).

mod answer;

use crate::admission::{AdmissionRequest, Payload, Verdict};
use crate::arena::RequestArena;
use crate::bytes;
use crate::cluster::{Cluster, ClusterRequest, OciManifestConfig};
use crate::limits;
use crate::policy::Policy;
use crate::settings::FieldError;
use kubewarden_policy_sdk::settings::SettingsValidationResponse;
use kubewarden_policy_sdk::wapc_guest::{self, CallResult};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// A rule's decision: the request and policy `P`'s checked settings ([`Policy::check`]) to a
/// verdict.
pub trait Decide<P: Policy>: FnOnce(AdmissionRequest, &P::Checked) -> Verdict {}

impl<P: Policy, F: FnOnce(AdmissionRequest, &P::Checked) -> Verdict> Decide<P> for F {}

/// The `validate` entry point: runs `decide` on the request and the settings of policy `P`,
/// checked ([`Policy::check`]). `decide` is handed the request: a policy that changes the
/// object moves it into its answer instead of copying it.
pub fn validate<P: Policy, F: Decide<P>>(payload: &[u8], decide: F) -> CallResult {
    respond(evaluate::<P, F>(payload, decide))
}

/// Parses, checks the settings and decides, without serializing the answer (for native
/// tests and benches).
pub fn evaluate<P: Policy, F: Decide<P>>(payload: &[u8], decide: F) -> Verdict {
    if let Err(message) = limits::check_request(payload) {
        return Verdict::reject(message).with_code(413);
    }
    read_and_decide::<P, F>(payload, decide)
}

/// The `validate` entry point of a policy module: [`validate`], with the settings read and
/// checked once per instance and kept in `cache` while the host sends the same settings text.
pub fn validate_cached<P: Policy, F: Decide<P>>(
    payload: &[u8],
    cache: &SettingsCache<P::Checked>,
    decide: F,
) -> CallResult {
    respond(evaluate_cached::<P, F>(payload, cache, decide))
}

/// [`validate_cached`] with what the request allocates served by `arena` (the module's
/// global allocator): the request, the decision and the answer are allocated in one
/// scope, and the answer handed to the host is a copy made outside it, so a request
/// leaves nothing behind in the arena. Settings read into `cache` (a kept instance's, from
/// its second request on) are bumped too, and set their chunk aside for as long as they are
/// kept; in policy-server every request runs on a fresh instance and reads its settings with
/// the request.
pub fn validate_in_arena<P: Policy, F: Decide<P>>(
    arena: &RequestArena,
    payload: &[u8],
    cache: &SettingsCache<P::Checked>,
    decide: F,
) -> CallResult {
    // An instance's first request is, in policy-server, its only one (see
    // `arena::leaving_released`).
    let first = !cache.asked_before();
    arena.scope(|| {
        crate::arena::leaving_released(first, || {
            let answer = respond(evaluate_cached::<P, F>(payload, cache, decide))?;
            Ok(arena.outside(|| answer.to_vec()))
        })
    })
}

/// [`evaluate`], with the checked settings from `cache` when the payload's settings text is
/// the one it holds. A host sends the same settings with every request of a policy (kwctl
/// and policy-server serialize them from the policy's configuration), so a kept instance
/// reads and checks them once. Verdicts, messages and codes are [`evaluate`]'s: a payload
/// the fast path cannot read (whatever the reason) is read again the way [`evaluate`] reads
/// it.
pub fn evaluate_cached<P: Policy, F: Decide<P>>(
    payload: &[u8],
    cache: &SettingsCache<P::Checked>,
    decide: F,
) -> Verdict {
    if let Err(message) = limits::check_request(payload) {
        return Verdict::reject(message).with_code(413);
    }
    if let Some((request, settings)) = cache.request_with_kept(payload) {
        return decide(request, &settings);
    }
    // An instance's first request, and in policy-server (a fresh instance per request) every
    // request, is read in one pass, settings included: keeping the settings' text would take
    // a second pass over them, for a next request a fresh instance never gets. A kept
    // instance keeps them from its second request on.
    if cache.first_request() {
        return read_and_decide::<P, F>(payload, decide);
    }
    if let Some((request, settings)) = cache.request_with_read::<P>(payload) {
        return decide(request, &settings);
    }
    read_and_decide::<P, F>(payload, decide)
}

/// The payload with its settings left as JSON text, to compare with the cached text.
#[derive(Deserialize)]
struct RawPayload<'a> {
    request: AdmissionRequest,
    #[serde(borrow)]
    settings: &'a RawValue,
}

/// A payload cut to its request: `{"request":<request>}` (see
/// [`SettingsCache::request_with_kept`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestOnly {
    request: AdmissionRequest,
}

/// Settings text wrapped as `{"settings":<text>}` (see [`SettingsCache::read`]).
#[derive(Deserialize)]
struct SettingsOnly<S> {
    settings: Box<S>,
}

/// The checked settings one policy instance read last, with their JSON text (see
/// [`evaluate_cached`]). A module keeps one per instance, in a `thread_local`.
pub struct SettingsCache<C> {
    last: RefCell<Option<(Box<str>, Rc<C>)>>,
    /// Whether the instance has been asked before (see [`evaluate_cached`]).
    asked: Cell<bool>,
}

impl<C> SettingsCache<C> {
    pub const fn new() -> Self {
        SettingsCache {
            last: RefCell::new(None),
            asked: Cell::new(false),
        }
    }

    /// True the first time it is called, false after.
    fn first_request(&self) -> bool {
        !self.asked.replace(true)
    }

    /// Whether [`SettingsCache::first_request`] was called, without calling it.
    fn asked_before(&self) -> bool {
        self.asked.get()
    }
}

impl<C> Default for SettingsCache<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C> SettingsCache<C> {
    /// The request of `payload` and the kept settings, when `payload` is
    /// `{"request":<request>,"settings":<the kept settings text>}`, as kwctl and
    /// policy-server write it: the settings are then recognised by comparing bytes, not
    /// read, and the request is read from `{"request":<request>}`, at the depth it has in
    /// the payload. None for anything else (other settings, other spacing or members, a
    /// request that cannot be read): the caller then reads the payload as a whole, with
    /// the same verdicts and messages.
    #[inline(never)]
    fn request_with_kept(&self, payload: &[u8]) -> Option<(AdmissionRequest, Rc<C>)> {
        const HEAD: &[u8] = b"{\"request\":";
        const SETTINGS: &[u8] = b",\"settings\":";
        let last = self.last.borrow();
        let (kept, settings) = last.as_ref()?;
        let rest = payload.strip_prefix(HEAD)?.strip_suffix(b"}")?;
        let rest = bytes::strip_suffix(rest, kept.as_bytes())?;
        let request = rest.strip_suffix(SETTINGS)?;
        let mut only = Vec::with_capacity(HEAD.len() + request.len() + 1);
        only.extend_from_slice(HEAD);
        only.extend_from_slice(request);
        only.push(b'}');
        // Checked as UTF-8 once, then read as text: serde_json's slice reader checks every
        // string on its own (12% of a labels Pod's guest work; +25 KB per module).
        let only = serde_json::from_str::<RequestOnly>(std::str::from_utf8(&only).ok()?).ok()?;
        Some((only.request, Rc::clone(settings)))
    }

    /// The request of `payload` and its checked settings, read or kept (see
    /// [`SettingsCache::read`]); None when either cannot be read or checked on its own. Not
    /// inlined (see [`read_payload`]).
    #[inline(never)]
    fn request_with_read<P>(&self, payload: &[u8]) -> Option<(AdmissionRequest, Rc<C>)>
    where
        P: Policy<Checked = C>,
    {
        // As text, checked as UTF-8 once (see `request_with_kept`).
        let text = std::str::from_utf8(payload).ok()?;
        let p = serde_json::from_str::<RawPayload>(text).ok()?;
        let settings = self.read::<P>(p.settings.get())?;
        Some((p.request, settings))
    }

    /// The checked settings `text` reads as: the kept ones when `text` is the kept text,
    /// else `text` read, checked and kept. `None` when `text` cannot be read or checked on
    /// its own (the caller then reads the whole payload, for the error message).
    fn read<P>(&self, text: &str) -> Option<Rc<C>>
    where
        P: Policy<Checked = C>,
    {
        if let Some((kept, settings)) = &*self.last.borrow()
            && bytes::equal(kept.as_bytes(), text.as_bytes())
        {
            return Some(Rc::clone(settings));
        }
        // Read inside `{"settings":...}`, one level down as in the payload: serde_json counts
        // its recursion limit from the root, so settings too deep to read in the payload are
        // too deep here (no separate scan of their depth). As text, as every reader of the
        // settings reads them: one copy of the settings' reader in the module.
        let mut wrapped = String::with_capacity(text.len() + 13);
        wrapped.push_str("{\"settings\":");
        wrapped.push_str(text);
        wrapped.push('}');
        let settings = serde_json::from_str::<SettingsOnly<P::Settings>>(&wrapped).ok()?;
        let settings = Rc::from(checked::<P>(settings.settings).ok()?);
        *self.last.borrow_mut() = Some((text.into(), Rc::clone(&settings)));
        Some(settings)
    }
}

/// [`Policy::prepare`], in a frame of its own: the checked form is built there and handed
/// back boxed, not kept in the frames the policy decides under (see [`read_payload`]).
#[inline(never)]
fn checked<P: Policy>(settings: Box<P::Settings>) -> Result<Box<P::Checked>, FieldError> {
    P::prepare(settings)
}

/// The denial of a request whose settings read but do not check: `validate_settings`
/// refuses them first, so only settings that never went through it get here.
fn invalid_settings<P: Policy>(e: &FieldError) -> Verdict {
    Verdict::reject(format!("{} has invalid settings: {e}", P::NAME))
}

/// Reads the whole payload (request and typed settings) in one pass, checks the settings
/// and decides; a payload that cannot be read is denied with code 400 and serde's message,
/// with the field's path, and settings that do not check are denied naming the field.
fn read_and_decide<P: Policy, F: Decide<P>>(payload: &[u8], decide: F) -> Verdict {
    match read_payload::<P::Settings>(payload) {
        Ok(p) => match checked::<P>(p.settings) {
            Ok(settings) => {
                let verdict = decide(p.request, &settings);
                crate::arena::release(settings);
                verdict
            }
            Err(e) => invalid_settings::<P>(&e),
        },
        Err(e) => {
            Verdict::reject(format!("the admission request could not be read: {e}")).with_code(400)
        }
    }
}

/// The payload read whole, or serde's message. Not inlined, like the other readers of the
/// payload: reading takes a large stack frame (the reader's temporaries), popped before the
/// policy decides. Policy-server runs each request on a fresh instance, whose every stack
/// page costs a page fault the first time it is touched.
#[inline(never)]
fn read_payload<S: DeserializeOwned>(payload: &[u8]) -> Result<Payload<S>, String> {
    utf8_text(payload)
        .and_then(|text| serde_json::from_str::<Payload<S>>(text).map_err(|e| read_error(text, &e)))
}

/// `bytes` as text, or where they stop being UTF-8. JSON is read as text (serde_json's
/// reader of bytes would check each string again, and be a second copy of every reader in
/// the module).
fn utf8_text(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes)
        .map_err(|e| format!("not UTF-8 text: invalid byte at offset {}", e.valid_up_to()))
}

/// serde_json's error `e` about `payload`, with the path of the field it is about
/// (`settings.exemptNamespaces: invalid type...`): serde_json itself gives only a line
/// and column, and [`crate::settings::path_of`] finds the field at that position in the
/// payload's text. Nesting beyond serde_json's recursion limit is said in words, without
/// the path (`[0][0][0]...`).
fn read_error(payload: &str, e: &serde_json::Error) -> String {
    if e.to_string().starts_with("recursion limit exceeded") {
        return limits::too_deep_text(e.line(), e.column());
    }
    match crate::settings::path_of(payload, e).trim_start_matches('.') {
        "" => e.to_string(),
        path => format!("{path}: {e}"),
    }
}

/// The `validate_settings` entry point: [`Policy::check`], said in Kubewarden's words.
/// Unknown fields and wrong types are reported as invalid settings (`settings: <field
/// path>: <serde's message>`), not as errors; so are settings over
/// [`limits::MAX_SETTINGS_BYTES`], before they are parsed.
pub fn validate_settings<P: Policy>(payload: &[u8]) -> CallResult {
    let result = limits::check_settings(payload)
        .and_then(|()| {
            // serde reads a struct from a list too (its fields in order): `[]` would pass
            // as the defaults.
            if payload.trim_ascii_start().starts_with(b"[") {
                return Err("must be a map of settings, not a list".to_string());
            }
            let text = utf8_text(payload)?;
            serde_json::from_str::<Box<P::Settings>>(text).map_err(|e| read_error(text, &e))
        })
        .map_err(|e| format!("settings: {e}"))
        .and_then(|settings| P::check(settings).map(drop).map_err(|e| e.to_string()));
    let response = SettingsValidationResponse {
        valid: result.is_ok(),
        message: result.err(),
    };
    Ok(serde_json::to_vec(&response)?)
}

/// Writes a verdict as Kubewarden's `ValidationResponse` (`kubewarden/answer.rs`), its
/// message cut to [`limits::MAX_MESSAGE_BYTES`]. Not inlined: the writer's frame is its own,
/// not part of the frame the policy decides under (see `read_payload`).
#[inline(never)]
pub fn respond(mut v: Verdict) -> CallResult {
    let message = v.message.take().map(limits::cap_message);
    let answer = answer::Answer {
        accepted: v.allowed,
        message: message.as_deref(),
        code: v.code,
        mutated_object: v.mutated_object.as_ref(),
        audit_annotations: (!v.audit_annotations.is_empty()).then_some(&v.audit_annotations),
        warnings: (!v.warnings.is_empty()).then_some(v.warnings.as_slice()),
    }
    .to_json();
    crate::arena::release((v, message));
    Ok(answer)
}

pub use crate::policy::{
    GET_RESOURCE, LIST_RESOURCES_ALL, LIST_RESOURCES_BY_NAMESPACE, OCI_MANIFEST_CONFIG,
};
/// What [`crate::kubewarden_policy!`] expands to refers to these.
pub use kubewarden_policy_sdk::{protocol_version_guest, wapc_guest as guest};

/// A policy crate's whole code: registers `validate`, `validate_settings` and
/// `protocol_version` for the [`crate::policy::Policy`] `$policy`, with host calls limited
/// to its `HOST_CALLS`.
#[macro_export]
macro_rules! kubewarden_policy {
    ($policy:ty) => {
        /// The module's allocator: what one request allocates is bumped from an arena
        /// ([`$crate::arena`]).
        #[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
        #[global_allocator]
        static ALLOCATOR: $crate::arena::RequestArena = $crate::arena::RequestArena::new();
        #[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
        fn with_arena<R>(f: impl FnOnce(&$crate::arena::RequestArena) -> R) -> R {
            f(&ALLOCATOR)
        }
        /// Natively (tests, benches) the arena is not the allocator: its scopes change
        /// nothing, and `validate` runs the module's code path on the system allocator.
        #[cfg(not(all(target_arch = "wasm32", not(target_feature = "atomics"))))]
        fn with_arena<R>(f: impl FnOnce(&$crate::arena::RequestArena) -> R) -> R {
            ::std::thread_local! {
                static ALLOCATOR: $crate::arena::RequestArena =
                    const { $crate::arena::RequestArena::new() };
            }
            ALLOCATOR.with(f)
        }

        #[unsafe(no_mangle)]
        pub extern "C" fn wapc_init() {
            $crate::kubewarden::guest::register_function("validate", validate);
            $crate::kubewarden::guest::register_function("validate_settings", validate_settings);
            $crate::kubewarden::guest::register_function(
                "protocol_version",
                $crate::kubewarden::protocol_version_guest,
            );
        }

        /// Decides one admission request.
        pub fn validate(payload: &[u8]) -> $crate::kubewarden::guest::CallResult {
            use $crate::policy::Policy;
            ::std::thread_local! {
                /// The checked settings this instance read last (the host sends the same
                /// ones with every request).
                static SETTINGS: $crate::kubewarden::SettingsCache<<$policy as Policy>::Checked> =
                    const { $crate::kubewarden::SettingsCache::new() };
            }
            with_arena(|arena| {
                SETTINGS.with(|cache| {
                    $crate::kubewarden::validate_in_arena::<$policy, _>(
                        arena,
                        payload,
                        cache,
                        |request, settings| {
                            <$policy>::evaluate_owned(
                                request,
                                settings,
                                &$crate::kubewarden::HostCluster::<
                                    { <$policy as Policy>::HOST_CALLS },
                                >,
                            )
                        },
                    )
                })
            })
        }

        /// Checks the policy settings.
        pub fn validate_settings(payload: &[u8]) -> $crate::kubewarden::guest::CallResult {
            $crate::kubewarden::validate_settings::<$policy>(payload)
        }
    };
}

/// The cluster as seen through waPC host calls (binding `kubewarden`, namespaces
/// `kubernetes` and `oci`), limited to the operations in `OPS` (a set of the constants
/// above), the ones the policy's `metadata.yml` declares in `hostCapabilities`.
///
/// The operation names are written here, each behind its own `OPS` test, and not taken
/// from [`ClusterRequest::operation`]: a module then holds only the names of the
/// operations it can call. `kwctl annotate` finds a module's host capabilities by looking
/// for those names in its data, and warns about every one that `metadata.yml` does not
/// declare. A request for an operation outside `OPS` is answered as the host answers a
/// capability it does not grant, without calling it.
pub struct HostCluster<const OPS: u8>;

impl<const OPS: u8> Cluster for HostCluster<OPS> {
    fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
        let operation = match request {
            ClusterRequest::Get(_) if OPS & GET_RESOURCE != 0 => "get_resource",
            ClusterRequest::ListAll(_) if OPS & LIST_RESOURCES_ALL != 0 => "list_resources_all",
            ClusterRequest::ListInNamespace(_) if OPS & LIST_RESOURCES_BY_NAMESPACE != 0 => {
                "list_resources_by_namespace"
            }
            _ => {
                return Err(format!(
                    "this policy does not call the host to read {} this way",
                    request.what()
                ));
            }
        };
        wapc_guest::host_call("kubewarden", "kubernetes", operation, &request.payload())
            .map_err(|e| e.to_string())
    }

    fn oci_manifest_config(&self, request: &OciManifestConfig) -> Result<Vec<u8>, String> {
        if OPS & OCI_MANIFEST_CONFIG == 0 {
            return Err(format!(
                "this policy does not call the host to read the config of image {}",
                request.image
            ));
        }
        wapc_guest::host_call(
            "kubewarden",
            "oci",
            "v1/oci_manifest_config",
            &request.payload(),
        )
        .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::{Value, json};

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct S {
        #[serde(default)]
        limit: u32,
    }

    /// A policy for the glue's tests, on settings of any of the types below: they check
    /// as [`Checks`] says, and are their own checked form.
    struct Toy<T>(std::marker::PhantomData<T>);

    trait Checks {
        fn checks(&self) -> Result<(), FieldError> {
            Ok(())
        }
    }

    impl<T: Checks> crate::settings::Common for T {
        fn exempt_namespaces(&self) -> &crate::settings::NamespaceList {
            static NONE: crate::settings::NamespaceList =
                crate::settings::NamespaceList(Vec::new());
            &NONE
        }
    }

    impl<T: Checks> crate::settings::ValidateSettings for T {
        fn validate(&self) -> Result<(), FieldError> {
            self.checks()
        }
    }

    /// Checked on every path, as a policy whose form needs every check.
    impl<T: Checks> crate::settings::CheckedForm<T> for T {
        fn check(settings: Box<T>) -> Result<Box<T>, FieldError> {
            Self::prepare(settings)
        }
        fn prepare(settings: Box<T>) -> Result<Box<T>, FieldError> {
            settings.checks()?;
            Ok(settings)
        }
    }

    impl<T: DeserializeOwned + Checks> Policy for Toy<T> {
        const NAME: &'static str = "toy-policy";
        const HOST_CALLS: u8 = 0;
        type Settings = T;
        type Checked = T;
        fn decide(_: crate::policy::Admission<'_, T>) -> Verdict {
            Verdict::accept()
        }
    }

    impl Checks for Value {}

    impl Checks for S {
        fn checks(&self) -> Result<(), FieldError> {
            if self.limit > 10 {
                Err(crate::settings::FieldError::new(
                    "limit",
                    "must be at most 10",
                ))
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn the_answer_is_kubewardens_validation_response() {
        use kubewarden_policy_sdk::response::ValidationResponse;
        let verdict = Verdict::reject("no")
            .with_code(403)
            .with_audit("b", "2")
            .with_audit("a", "1")
            .with_warning("careful");
        let bytes = respond(verdict).unwrap();
        let sdk: ValidationResponse = serde_json::from_slice(&bytes).unwrap();
        assert!(!sdk.accepted);
        assert_eq!(sdk.message.as_deref(), Some("no"));
        assert_eq!(sdk.code, Some(403));
        assert!(sdk.mutated_object.is_none());
        let audits = sdk.audit_annotations.unwrap();
        assert_eq!((audits["a"].as_str(), audits["b"].as_str()), ("1", "2"));
        assert_eq!(sdk.warnings, Some(vec!["careful".to_string()]));

        let bytes = respond(Verdict::mutate(json!({"kind": "Pod"}))).unwrap();
        let answer: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            answer,
            json!({"accepted": true, "message": null, "code": null,
                   "mutated_object": {"kind": "Pod"}, "audit_annotations": null, "warnings": null})
        );
    }

    fn settings(payload: Value) -> Value {
        serde_json::from_slice(
            &validate_settings::<Toy<S>>(payload.to_string().as_bytes()).unwrap(),
        )
        .unwrap()
    }

    /// The message of settings that are not valid.
    fn refusal(value: Value) -> String {
        let out = settings(value);
        assert_eq!(out["valid"], false, "{out}");
        out["message"].as_str().unwrap().to_string()
    }

    /// The message of settings that are not valid, asserted to start with `opening`.
    fn refusal_starting(value: Value, opening: &str) -> String {
        let message = refusal(value);
        assert!(message.starts_with(opening), "{message}");
        message
    }

    #[test]
    fn settings_valid_invalid_and_unknown() {
        assert_eq!(
            settings(json!({"limit": 3})),
            json!({"valid": true, "message": null})
        );
        assert_eq!(refusal(json!({"limit": 30})), "limit: must be at most 10");
        assert_eq!(
            refusal(json!([3])),
            "settings: must be a map of settings, not a list"
        );
        let unknown = refusal_starting(
            json!({"limt": 3}),
            "settings: unknown field `limt`, expected `limit`",
        );
        assert!(unknown.contains("limt"), "{unknown}");
    }

    #[test]
    fn wrong_types_name_the_field() {
        refusal_starting(
            json!({"limit": "three"}),
            "settings: limit: invalid type: string \"three\"",
        );
        let out = validate::<Toy<S>, _>(
            json!({"request": {"operation": "CREATE"}, "settings": {"limit": []}})
                .to_string()
                .as_bytes(),
            |_, _| Verdict::accept(),
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["code"], 400);
        assert!(
            v["message"].as_str().unwrap().starts_with(
                "the admission request could not be read: settings.limit: invalid type: sequence"
            ),
            "{v}"
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_say_where() {
        let out = validate_settings::<Toy<S>>(b"{\"limit\": 2, \"x\": \"\xff\"}").unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["valid"], false);
        assert_eq!(
            v["message"],
            "settings: not UTF-8 text: invalid byte at offset 19"
        );
        let payload = b"{\"request\": {\"namespace\": \"m\xff\"}, \"settings\": {\"limit\": 2}}";
        let cache = SettingsCache::new();
        for _ in 0..2 {
            let v = evaluate_cached::<Toy<S>, _>(payload, &cache, |_, _: &S| Verdict::accept());
            assert_eq!(v.code, Some(400));
            assert_eq!(
                v.message.as_deref(),
                Some(
                    "the admission request could not be read: not UTF-8 text: invalid byte at offset 28"
                )
            );
        }
    }

    #[test]
    fn payloads_over_the_limits_are_413_before_parsing() {
        let mut big = br#"{"request": {}, "settings": {}}"#.to_vec();
        big.resize(limits::MAX_REQUEST_BYTES + 1, b' ');
        let decided = std::cell::Cell::new(false);
        let v = evaluate::<Toy<S>, _>(&big, |_, _| {
            decided.set(true);
            Verdict::accept()
        });
        assert!(!v.allowed && !decided.get());
        assert_eq!(v.code, Some(413));
        assert!(
            v.message
                .unwrap()
                .starts_with("the admission request is 8.1 MiB;"),
            "over the byte limit"
        );
        let many = format!(
            r#"{{"request": {{"object": [{}]}}, "settings": {{}}}}"#,
            vec!["0"; limits::MAX_REQUEST_VALUES].join(",")
        );
        let v = evaluate::<Toy<S>, _>(many.as_bytes(), |_, _| Verdict::accept());
        assert_eq!(v.code, Some(413));
        assert!(
            v.message.unwrap().contains("JSON values"),
            "over the value limit"
        );
        let mut big_settings = br#"{"limit": 1}"#.to_vec();
        big_settings.resize(limits::MAX_SETTINGS_BYTES + 1, b' ');
        let out: Value =
            serde_json::from_slice(&validate_settings::<Toy<S>>(&big_settings).unwrap()).unwrap();
        assert_eq!(out["valid"], false);
        assert_eq!(
            out["message"],
            "settings: the settings are 1.1 MiB; gpu-admission policies read at most 1 MiB of settings"
        );
    }

    #[test]
    fn deep_nesting_is_a_rejection_that_says_so() {
        let deep = format!(
            r#"{{"request": {{"object": {}{}}}, "settings": {{}}}}"#,
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        let v = evaluate::<Toy<S>, _>(deep.as_bytes(), |_, _| Verdict::accept());
        assert_eq!(v.code, Some(400));
        assert_eq!(
            v.message.unwrap(),
            "the admission request could not be read: its JSON is nested more than 127 levels deep (at line 1, column 149); gpu-admission policies read at most 127 levels"
        );
        // Typed settings stop at the first value of the wrong type, before the depth
        // matters; an untyped reader meets the recursion limit and says so.
        let out: Value = serde_json::from_slice(
            &validate_settings::<Toy<S>>("[".repeat(10_000).as_bytes()).unwrap(),
        )
        .unwrap();
        assert_eq!(out["valid"], false);
        let deep = "[".repeat(10_000);
        let e = serde_json::from_str::<Value>(&deep).unwrap_err();
        assert!(
            read_error(&deep, &e).starts_with(
                "its JSON is nested more than 127 levels deep (at line 1, column 128)"
            )
        );
    }

    thread_local! {
        static READS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Settings that count how often they are read.
    #[derive(Deserialize)]
    struct Counted {
        #[serde(deserialize_with = "counted")]
        limit: u32,
    }

    impl Checks for Counted {}

    fn counted<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        READS.with(|r| r.set(r.get() + 1));
        u32::deserialize(d)
    }

    fn limit_of(payload: &str, cache: &SettingsCache<Counted>) -> Verdict {
        evaluate_cached::<Toy<Counted>, _>(payload.as_bytes(), cache, |r, s: &Counted| {
            Verdict::reject(format!("{} {}", r.namespace, s.limit))
        })
    }

    #[test]
    fn cached_settings_are_read_once_while_their_text_is_the_same() {
        let cache = SettingsCache::new();
        let reads = || READS.with(|r| r.get());
        let start = reads();
        let with = |ns: &str, settings: &str| {
            format!(r#"{{"request": {{"namespace": "{ns}"}}, "settings": {settings}}}"#)
        };
        let answer =
            |ns: &str, settings: &str| limit_of(&with(ns, settings), &cache).message.unwrap();
        assert_eq!(answer("a", r#"{"limit": 3}"#), "a 3");
        assert_eq!(reads() - start, 1);
        assert_eq!(answer("b", r#"{"limit": 3}"#), "b 3");
        assert_eq!(
            reads() - start,
            2,
            "the first request is read in one pass, its settings not kept"
        );
        assert_eq!(answer("b2", r#"{"limit": 3}"#), "b2 3");
        assert_eq!(reads() - start, 2, "kept settings are not read again");
        assert_eq!(answer("c", r#"{"limit":4}"#), "c 4");
        assert_eq!(answer("d", r#"{"limit": 3}"#), "d 3");
        assert_eq!(reads() - start, 4, "other settings text is read again");
        // Settings the fast path cannot read are read with the payload, for the message.
        let bad = limit_of(&with("e", r#"{"limit": "x"}"#), &cache);
        assert_eq!(bad.code, Some(400));
        assert!(bad.message.unwrap().starts_with(
            "the admission request could not be read: settings.limit: invalid type: string"
        ));
        assert_eq!(answer("f", r#"{"limit": 3}"#), "f 3");
    }

    #[test]
    fn cached_and_uncached_reading_answer_alike() {
        let deep_settings = format!(
            r#"{{"request": {{}}, "settings": {{"limit": 1, "x": {}{}}}}}"#,
            "[".repeat(120),
            "]".repeat(120)
        );
        let deep_request = format!(
            r#"{{"request": {{"object": {}{}}}, "settings": {{}}}}"#,
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        let mut big = br#"{"request": {}, "settings": {}}"#.to_vec();
        big.resize(limits::MAX_REQUEST_BYTES + 1, b' ');
        let many = format!(
            r#"{{"request": {{"object": [{}]}}, "settings": {{}}}}"#,
            vec!["0"; limits::MAX_REQUEST_VALUES].join(",")
        );
        for payload in [
            r#"{"request": {"namespace": "ml"}, "settings": {"limit": 2}}"#.as_bytes(),
            br#"{"settings": {"limit": 2}, "request": {"namespace": "ml"}}"#,
            br#"{"request": {"namespace": "ml"}, "settings": {"limit": 2, "limt": 1}}"#,
            br#"{"request": {"namespace": 7}, "settings": {"limit": 2}}"#,
            br#"{"request": {"namespace": "ml"}, "settings": [2]}"#,
            br#"{"request": {"namespace": "ml"}}"#,
            br#"{"request": {}, "settings": {"limit": 2}, "settings": {"limit": 3}}"#,
            br#"{"request": {}, "settings": {"limit": 2"#,
            b"{\"request\": {\"namespace\": \"m\xff\"}, \"settings\": {\"limit\": 2}}",
            b"{not json",
            deep_settings.as_bytes(),
            deep_request.as_bytes(),
            &big,
            many.as_bytes(),
        ] {
            let decide = |r: AdmissionRequest, s: &S| {
                Verdict::reject(format!("{} {}", r.namespace, s.limit))
            };
            let cache = SettingsCache::new();
            let cached = evaluate_cached::<Toy<S>, _>(payload, &cache, decide);
            assert_eq!(
                cached,
                evaluate::<Toy<S>, _>(payload, decide),
                "{}",
                String::from_utf8_lossy(&payload[..payload.len().min(120)])
            );
            assert_eq!(
                evaluate_cached::<Toy<S>, _>(payload, &cache, decide),
                cached
            );
        }
        // Settings any JSON reads as, nested too deep inside the payload but not on their
        // own: read with the payload, so denied as before.
        for depth in [60, 126, 127, 130] {
            let payload = format!(
                r#"{{"request": {{}}, "settings": {}{}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            );
            let decide = |_: AdmissionRequest, _: &Value| Verdict::accept();
            let cached =
                evaluate_cached::<Toy<Value>, _>(payload.as_bytes(), &SettingsCache::new(), decide);
            assert_eq!(
                cached,
                evaluate::<Toy<Value>, _>(payload.as_bytes(), decide),
                "depth {depth}"
            );
            assert_eq!(cached.allowed, depth < 127, "depth {depth}: {cached:?}");
        }
    }

    /// Payloads as kwctl and policy-server write them (compact, request first): the
    /// second one with the same settings text takes the fast path, and answers as the
    /// whole payload read on its own does.
    #[test]
    fn host_written_payloads_read_with_kept_settings_answer_alike() {
        let nested = |depth: usize| {
            format!(
                r#"{{"request":{{"namespace":"ml","object":{}{}}},"settings":{{"limit":2}}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            )
        };
        let mut payloads: Vec<String> = [
            r#"{"request":{"namespace":"ml"},"settings":{"limit":2}}"#,
            r#"{"request":{"namespace":"ml"},"x":1,"settings":{"limit":2}}"#,
            r#"{"request":{"namespace":"ml"},"settings":{"limit":1},"settings":{"limit":2}}"#,
            r#"{"request":{"namespace":7},"settings":{"limit":2}}"#,
            r#"{"request":{"namespace":"ml"}},"settings":{"limit":2}}"#,
            r#"{"request":{"namespace":"ml"},"request":{"namespace":"x"},"settings":{"limit":2}}"#,
            r#"{"request":{"namespace":"ml","settings":{"limit":2}}"#,
        ]
        .map(String::from)
        .into();
        payloads.extend([120, 124, 125, 126, 127].map(nested));
        let decide =
            |r: AdmissionRequest, s: &S| Verdict::reject(format!("{} {}", r.namespace, s.limit));
        for payload in &payloads {
            let cache = SettingsCache::new();
            // The settings text of the payload, kept as a host's earlier requests leave it
            // (the first is read in one pass; the second keeps its settings).
            for _ in 0..2 {
                let earlier = evaluate_cached::<Toy<S>, _>(
                    br#"{"request":{"namespace":"a"},"settings":{"limit":2}}"#,
                    &cache,
                    decide,
                );
                assert_eq!(earlier.message.as_deref(), Some("a 2"));
            }
            assert_eq!(
                evaluate_cached::<Toy<S>, _>(payload.as_bytes(), &cache, decide),
                evaluate::<Toy<S>, _>(payload.as_bytes(), decide),
                "{}",
                &payload[..payload.len().min(120)]
            );
        }
        // The fast path is taken for the payloads a host writes, and only for them.
        let cache = SettingsCache::<S>::new();
        let kept = |p: &str| cache.request_with_kept(p.as_bytes()).is_some();
        assert!(!kept(&payloads[0]), "nothing is kept yet");
        evaluate_cached::<Toy<S>, _>(payloads[0].as_bytes(), &cache, decide);
        assert!(
            !kept(&payloads[0]),
            "an instance's first request keeps nothing"
        );
        evaluate_cached::<Toy<S>, _>(payloads[0].as_bytes(), &cache, decide);
        assert!(kept(&payloads[0]));
        assert!(kept(&nested(120)));
        // The nested payloads above straddle the depth limit: equal answers there mean
        // the fast path reads a request at the depth it has in the whole payload.
        let readable =
            |d: usize| evaluate::<Toy<S>, _>(nested(d).as_bytes(), decide).code != Some(400);
        assert!(readable(120) && !readable(127));
        for other in [
            &payloads[1],
            &payloads[2],
            &payloads[3],
            &payloads[4],
            &payloads[5],
            &payloads[6],
            &nested(127),
        ] {
            assert!(!kept(other), "{other}");
        }
        assert!(!kept(
            r#"{"request":{"namespace":"ml"}, "settings":{"limit":2}}"#
        ));
        assert!(!kept(
            r#"{"request":{"namespace":"ml"},"settings":{"limit":3}}"#
        ));
    }

    /// Settings that read but do not check (a host refuses them at `validate_settings`) are
    /// refused on every path, naming the field, before the policy decides; the cache keeps
    /// only checked settings.
    #[test]
    fn settings_that_do_not_check_are_refused_before_deciding() {
        let payload = br#"{"request":{"namespace":"ml"},"settings":{"limit":30}}"#;
        let decided = std::cell::Cell::new(0);
        let decide = |_: AdmissionRequest, _: &S| {
            decided.set(decided.get() + 1);
            Verdict::accept()
        };
        let refused = Verdict::reject("toy-policy has invalid settings: limit: must be at most 10");
        assert_eq!(evaluate::<Toy<S>, _>(payload, decide), refused);
        let cache = SettingsCache::new();
        for _ in 0..3 {
            assert_eq!(
                evaluate_cached::<Toy<S>, _>(payload, &cache, decide),
                refused
            );
        }
        assert_eq!(decided.get(), 0);
        assert!(cache.request_with_kept(payload).is_none(), "nothing kept");
    }

    #[test]
    fn malformed_payload_is_a_rejection_not_an_error() {
        let out = validate::<Toy<S>, _>(b"{not json", |_, _| Verdict::accept()).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["accepted"], false);
        assert_eq!(v["code"], 400);
        assert!(v["message"].as_str().unwrap().contains("could not be read"));
    }

    #[test]
    fn verdict_is_serialized_for_kubewarden() {
        let payload = json!({"request": {"uid": "1", "namespace": "ml"}, "settings": {}});
        let out = validate::<Toy<S>, _>(payload.to_string().as_bytes(), |r, s| {
            Verdict::reject(format!("{} {}", r.namespace, s.limit))
                .with_warning("w")
                .with_audit("a", "b")
        })
        .unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            json!({"accepted": false, "message": "ml 0", "code": null, "mutated_object": null,
                   "audit_annotations": {"a": "b"}, "warnings": ["w"]})
        );
    }
}
