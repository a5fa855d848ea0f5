//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test binary uses a different subset

pub mod cases;
pub mod dates;
pub mod manifests;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use gpu_e2e::{
    AdmissionResponse, ContextAwareAccess, Evaluation, Policy, ReplaySession, module_path,
    read_admission_request, read_settings,
};
use serde_json::Value;

/// Fails unless `response` rejects with HTTP `code` and a message starting with `start`.
pub fn assert_rejected_starting(response: &AdmissionResponse, code: u16, start: &str) {
    assert!(!response.allowed, "{response:?}");
    assert_eq!(response.code(), Some(code), "{response:?}");
    let message = response.message().unwrap_or_default();
    assert!(message.starts_with(start), "{message:?}");
}

/// A built module by package name (compiled once per test binary).
pub fn built(package: &str) -> Policy {
    static BUILT: Mutex<BTreeMap<String, Policy>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    built
        .entry(package.to_owned())
        .or_insert_with(|| {
            let path = module_path(package).unwrap_or_else(|e| panic!("{e:#}"));
            Policy::load(path).unwrap_or_else(|e| panic!("{e:#}"))
        })
        .clone()
}

/// The built fixture policy.
pub fn fixture() -> Policy {
    built("fixture-policy")
}

/// One policy of `policies/`: its built module and its files.
#[derive(Clone, Copy)]
pub struct PolicyUnderTest(pub &'static str);

impl PolicyUnderTest {
    pub fn module(self) -> Policy {
        built(self.0)
    }

    /// `policies/<name>/`.
    pub fn dir(self) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../policies")
            .join(self.0)
    }

    /// A file of the policy's `test_data/`.
    pub fn data(self, file: &str) -> PathBuf {
        self.dir().join("test_data").join(file)
    }

    pub fn request(self, file: &str) -> Value {
        read_admission_request(self.data(file)).unwrap_or_else(|e| panic!("{e:#}"))
    }

    pub fn settings(self, file: &str) -> Value {
        read_settings(self.data(file)).unwrap_or_else(|e| panic!("{e:#}"))
    }

    pub fn session(self, file: &str) -> ReplaySession {
        ReplaySession::from_file(self.data(file)).unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// The answer to `request` under `settings`, with no replay session (a host call fails
    /// through the harness's "no replay session" error).
    pub fn validate(self, request: &Value, settings: &Value) -> AdmissionResponse {
        self.module()
            .validate(request, settings, None)
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// Evaluates the request file with the settings file, serving host calls from the
    /// session file (none: any host call fails through the harness's "no replay session"
    /// error, which the case would show).
    pub fn evaluate(self, request: &str, settings: &str, session: Option<&str>) -> Evaluation {
        self.module()
            .evaluate(
                &self.request(request),
                &self.settings(settings),
                session.map(|s| self.session(s)),
            )
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// The names of the files in the policy's `test_data/`.
    pub fn test_data_files(self) -> Vec<String> {
        std::fs::read_dir(self.dir().join("test_data"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// Whether the policy's README.md quotes `text`; with `wraps` (a README whose lines wrap
    /// the messages), white space folded on both sides.
    pub fn readme_quotes(self, text: &str, wraps: bool) -> bool {
        let readme = std::fs::read_to_string(self.dir().join("README.md")).unwrap_or_default();
        let fold = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        match wraps {
            true => fold(&readme).contains(&fold(text)),
            false => readme.contains(text),
        }
    }

    /// Fails, naming them, unless the policy's README.md quotes every text.
    pub fn assert_readme_quotes<'a>(self, texts: impl IntoIterator<Item = &'a str>) {
        let missing: Vec<&str> = texts
            .into_iter()
            .filter(|t| !self.readme_quotes(t, false))
            .collect();
        assert!(
            missing.is_empty(),
            "README.md does not quote:\n{}",
            missing.join("\n")
        );
    }

    /// Evaluates the request file with the settings file, host calls answered from the
    /// session file, the policy granted only the context-aware `resources` (a metadata.yml
    /// `contextAwareResources` list, e.g. that of a version deployed before a resource was
    /// needed).
    pub fn evaluate_granted(
        self,
        resources: Value,
        request: &str,
        settings: &str,
        session: &str,
    ) -> Evaluation {
        let metadata = serde_json::json!({ "contextAwareResources": resources });
        self.module()
            .with_context_aware_access(ContextAwareAccess::from_metadata(Some(&metadata)))
            .evaluate(
                &self.request(request),
                &self.settings(settings),
                Some(self.session(session)),
            )
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// The denial of the request file `request` when the policy is granted only the
    /// context-aware `resources` ([`Self::evaluate_granted`]): fails unless the request is
    /// denied with a message.
    pub fn denial_granted(
        self,
        resources: Value,
        request: &str,
        settings: &str,
        session: &str,
    ) -> String {
        let response = self
            .evaluate_granted(resources, request, settings, session)
            .response;
        assert!(!response.allowed, "{request}: allowed without the grant");
        response
            .message()
            .unwrap_or_else(|| panic!("{request}: denied without a message"))
            .to_string()
    }

    /// The denial of the request file `request` when the policy is granted no context-aware
    /// resource (a ClusterAdmissionPolicy without contextAwareResources, kwctl run without
    /// --allow-context-aware), host calls answered from the session file: fails unless the
    /// request is denied with a message.
    pub fn ungranted_denial(self, request: &str, settings: &str, session: &str) -> String {
        self.denial_granted(Value::Array(Vec::new()), request, settings, session)
    }

    /// The message the policy refuses `settings` with: fails if they are valid.
    pub fn settings_refusal(self, settings: &Value) -> String {
        let v = self.module().validate_settings(settings).unwrap();
        assert!(!v.valid, "valid settings: {settings}");
        v.message.unwrap_or_default()
    }

    /// Fails unless every exception of the policy's test_data/settings_exceptions.yml ends
    /// (at the start of the day after its `expires`) more than 30 days from now: the tests
    /// expect them to apply.
    pub fn assert_exception_fixture_renewed(self) {
        let settings = self.settings(dates::EXCEPTIONS_FIXTURE);
        for exception in settings["exceptions"].as_array().unwrap() {
            let expires = exception["expires"].as_str().unwrap();
            let ends = dates::parse_utc(&format!("{expires}T00:00:00Z")).unwrap() + 86_400;
            dates::assert_more_than_30_days_ahead(
                ends,
                &format!(
                    "{}: test_data/settings_exceptions.yml: exception {} ends with {expires}, in less than 30 days; move its expires forward (at most maxExceptionDays from today) and the expected audit annotations (EXCEPTION_AUDIT) with it",
                    self.0, exception["name"]
                ),
            );
        }
    }

    /// Fails unless every file of `files` is valid settings.
    pub fn assert_valid_settings(self, files: &[&str]) {
        let policy = self.module();
        for file in files {
            let v = policy.validate_settings(&self.settings(file)).unwrap();
            assert!(v.valid, "{file}: {:?}", v.message);
        }
    }
}

/// A file under `e2e/fixture-policy/test_data/`.
pub fn test_data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixture-policy/test_data")
        .join(name)
}

pub fn request(name: &str) -> Value {
    read_admission_request(test_data(name)).unwrap()
}

pub fn settings(name: &str) -> Value {
    read_settings(test_data(name)).unwrap()
}

pub fn session(name: &str) -> ReplaySession {
    ReplaySession::from_file(test_data(name)).unwrap()
}

/// `e2e/fixture-policy/metadata.yml` as the JSON `kwctl annotate` embeds
/// (plus the `protocolVersion` kwctl fills in).
pub fn fixture_metadata() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixture-policy/metadata.yml");
    let mut metadata = read_settings(path).unwrap();
    metadata["protocolVersion"] = Value::from("v1");
    metadata
}
