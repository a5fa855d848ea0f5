//! The policies of the workspace: every `policies/<name>/` with a `Cargo.toml`,
//! and the files distribution reads from it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use gpu_e2e::metadata::Metadata;

/// File names `kwctl scaffold artifacthub` accepts for the Rancher UI questions, in its order.
const QUESTIONS_FILES: &[&str] = &[
    "questions-ui.yml",
    "questions-ui.yaml",
    "questions.yml",
    "questions.yaml",
];

/// One policy crate under `policies/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyDir {
    /// The directory name, which is also the policy id (`gpu-labels-policy`).
    pub name: String,
    /// `policies/<name>`.
    pub dir: PathBuf,
}

/// Every policy of the workspace rooted at `root`, sorted by name.
pub fn workspace_policies(root: &Path) -> Result<Vec<PolicyDir>> {
    Ok(gpu_e2e::policy_names(root)?
        .into_iter()
        .map(|name| PolicyDir {
            dir: root.join("policies").join(&name),
            name,
        })
        .collect())
}

impl PolicyDir {
    /// `metadata.yml`.
    pub fn metadata_path(&self) -> PathBuf {
        self.dir.join("metadata.yml")
    }

    /// The text of `metadata.yml`.
    pub fn metadata_text(&self) -> Result<String> {
        let path = self.metadata_path();
        std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
    }

    /// `metadata.yml` parsed as policy-evaluator does.
    pub fn metadata(&self) -> Result<Metadata> {
        Metadata::from_yaml(&self.metadata_text()?)
            .with_context(|| format!("invalid {}", self.metadata_path().display()))
    }

    /// `README.md` (embedded as `io.kubewarden.policy.usage`, copied to Artifact Hub).
    pub fn readme_path(&self) -> PathBuf {
        self.dir.join("README.md")
    }

    /// The Rancher UI questions file, if there is one (first of `questions-ui.yml`,
    /// `questions-ui.yaml`, `questions.yml`, `questions.yaml`, like kwctl).
    pub fn questions_path(&self) -> Option<PathBuf> {
        QUESTIONS_FILES
            .iter()
            .map(|f| self.dir.join(f))
            .find(|p| p.is_file())
    }

    /// `annotated-policy.wasm`, written by `make annotate`.
    pub fn annotated_path(&self) -> PathBuf {
        self.dir.join("annotated-policy.wasm")
    }

    /// The `[package]` of the policy's `Cargo.toml`.
    pub fn package(&self) -> Result<CargoPackage> {
        let path = self.dir.join("Cargo.toml");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        CargoPackage::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    /// The built module's file name (`gpu_labels_policy.wasm`: cargo names
    /// cdylib outputs after the crate, `-` becoming `_`).
    pub fn module_file_name(&self) -> Result<String> {
        Ok(format!("{}.wasm", self.package()?.name.replace('-', "_")))
    }

    /// `examples/*.yaml` and `examples/*.yml`, sorted.
    pub fn example_manifests(&self) -> Result<Vec<PathBuf>> {
        yaml_files(&self.dir.join("examples"))
    }
}

/// The license a policy is published under: its `[package] license`, or the
/// workspace's `[workspace.package] license`.
pub fn policy_license(root: &Path, package: &CargoPackage) -> Result<Option<String>> {
    if package.license.is_some() {
        return Ok(package.license.clone());
    }
    let path = root.join("Cargo.toml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut in_table = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_table = line == "[workspace.package]";
        } else if in_table
            && let Some(value) = line.strip_prefix("license").map(str::trim_start)
            && let Some(value) = value.strip_prefix('=')
        {
            return Ok(value
                .trim()
                .strip_prefix('"')
                .and_then(|v| v.split_once('"'))
                .map(|(v, _)| v.to_string()));
        }
    }
    Ok(None)
}

/// `*.yaml` and `*.yml` files directly in `dir`, sorted; none if `dir` is missing.
pub fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| e == "yaml" || e == "yml")
        })
        .collect();
    out.sort();
    Ok(out)
}

/// What distribution needs from a crate's `Cargo.toml` `[package]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CargoPackage {
    /// `name`
    pub name: String,
    /// `version` (must be set in the crate itself: the policy versions differ)
    pub version: String,
    /// `license`, or `None` with `license.workspace = true`
    pub license: Option<String>,
}

impl CargoPackage {
    /// Reads `name` and `version` from the `[package]` table. Only the plain
    /// `key = "value"` form is understood; `version.workspace = true` is an error,
    /// since each policy is released with its own version.
    pub fn parse(cargo_toml: &str) -> Result<Self> {
        let mut in_package = false;
        let (mut name, mut version, mut license) = (None, None, None);
        for line in cargo_toml.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                in_package = line == "[package]";
                continue;
            }
            if !in_package {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let key = key.trim();
            let value = value.trim();
            let quoted = || {
                value
                    .strip_prefix('"')
                    .and_then(|v| v.split_once('"'))
                    .map(|(v, _)| v.to_string())
            };
            match key {
                "name" => name = quoted(),
                "version" => version = quoted(),
                "license" => license = quoted(),
                "version.workspace" => {
                    bail!(
                        "[package] version.workspace is not supported: each policy has its own version"
                    )
                }
                _ => {}
            }
        }
        Ok(Self {
            name: name.context("[package] has no name")?,
            version: version.context("[package] has no version = \"...\"")?,
            license,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_package() {
        let toml = "[package]\nname = \"gpu-x\"\nversion = \"1.2.3\" # released\nedition.workspace = true\n\n[dependencies]\nversion = \"9\"\n";
        assert_eq!(
            CargoPackage::parse(toml).unwrap(),
            CargoPackage {
                name: "gpu-x".into(),
                version: "1.2.3".into(),
                license: None,
            }
        );
        assert!(
            CargoPackage::parse("[package]\nname = \"x\"\nversion.workspace = true\n").is_err()
        );
        assert!(CargoPackage::parse("[dependencies]\nversion = \"1\"\n").is_err());
    }

    #[test]
    fn finds_the_workspace_policies() {
        let root = gpu_e2e::workspace_root();
        let policies = workspace_policies(&root).unwrap();
        assert!(policies.iter().any(|p| p.name == "gpu-labels-policy"));
        for p in &policies {
            assert_eq!(p.package().unwrap().name, p.name);
            assert!(p.module_file_name().unwrap().ends_with("_policy.wasm"));
            let package = p.package().unwrap();
            assert_eq!(
                policy_license(&root, &package).unwrap().as_deref(),
                Some("Apache-2.0")
            );
        }
    }
}
