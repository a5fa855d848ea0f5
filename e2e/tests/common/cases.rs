//! The case lists live in the harness library ([`gpu_e2e::cases`], shared with the manifest
//! checker's kwctl comparison); here, running a policy's cases through the harness.

// Each test binary uses a different subset (or none).
#[allow(unused_imports)]
pub use gpu_e2e::cases::*;

use gpu_e2e::{Evaluation, ReplaySession, read_admission_request, read_settings};
use serde_json::json;

use super::PolicyUnderTest;

impl PolicyUnderTest {
    /// Every case of `cases.yml` that says what the policy must answer, run through the
    /// harness and checked ([`Case::mismatches`], plus what `more` finds); fails listing
    /// every mismatch. The README comparison folds white space when `readme_wraps`.
    pub fn check_cases(self, readme_wraps: bool, more: impl Fn(&Case, &Evaluation) -> Vec<String>) {
        let quoted = |text: &str| self.readme_quotes(text, readme_wraps);
        let cases = read_cases(self.0).unwrap_or_else(|e| panic!("{e:#}"));
        let module = self.module();
        let metadata = read_settings(self.dir().join("metadata.yml")).unwrap();
        let mutating = metadata["mutating"] == true;
        let mut problems = Vec::new();
        let mut checked = 0;
        for case in cases.iter().filter(|c| c.expects()) {
            let request = read_admission_request(case.path(&case.request))
                .unwrap_or_else(|e| panic!("{}: {e:#}", case.label()));
            let settings = case.settings.as_ref().map_or(json!({}), |f| {
                read_settings(case.path(f)).unwrap_or_else(|e| panic!("{}: {e:#}", case.label()))
            });
            let session = case.session.as_ref().map(|f| {
                ReplaySession::from_file(case.path(f))
                    .unwrap_or_else(|e| panic!("{}: {e:#}", case.label()))
            });
            let evaluation = module
                .evaluate(&request, &settings, session)
                .unwrap_or_else(|e| panic!("{}: {e:#}", case.label()));
            let r = &evaluation.response;
            if request["uid"].as_str() != Some(r.uid.as_str()) {
                problems.push(format!("{}: uid {} not echoed", case.label(), r.uid));
            }
            if r.patch.is_some() && !mutating {
                problems.push(format!("{}: a validating policy patched", case.label()));
            }
            problems.extend(case.mismatches(&evaluation, quoted));
            problems.extend(more(case, &evaluation));
            checked += 1;
        }
        assert!(checked > 0, "{}: no case says what to answer", self.0);
        assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    }

    /// Fails unless every request, settings file and replay session of `test_data/` is in
    /// a case that says what to answer, or among `elsewhere` (files named tests check).
    pub fn assert_every_file_has_an_answer(self, elsewhere: &[&str]) {
        let cases = read_cases(self.0).unwrap_or_else(|e| panic!("{e:#}"));
        let answered: Vec<&str> = cases
            .iter()
            .filter(|c| c.expects())
            .flat_map(|c| [Some(&c.request), c.settings.as_ref(), c.session.as_ref()])
            .flatten()
            .filter_map(|f| f.strip_prefix("test_data/"))
            .collect();
        let unanswered: Vec<String> = self
            .test_data_files()
            .into_iter()
            .filter(|f| f.ends_with(".json") || f.ends_with(".yml"))
            .filter(|f| f != "cases.yml" && f != "session_no_calls.yml")
            .filter(|f| !answered.contains(&f.as_str()) && !elsewhere.contains(&f.as_str()))
            .collect();
        assert!(
            unanswered.is_empty(),
            "no case of cases.yml says what these give: {unanswered:?}"
        );
    }
}
