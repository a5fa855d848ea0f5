//! The node labels the inventory reads, each configurable (`""` turns one off).
//! Defaults: NVIDIA GPU Feature Discovery, AMD's node labeller, Intel's NFD rules.

use crate::settings::{FieldError, validate_label_key};
use serde::Deserialize;

/// The placeholder of [`LabelKeys::mig_memory`].
pub const PROFILE: &str = "<profile>";
/// GFD's label of a MIG profile's memory (mixed strategy).
pub const DEFAULT_MIG_MEMORY: &str = "nvidia.com/mig-<profile>.memory";

/// Node label keys (settings `nodeInventory.labelKeys`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct LabelKeys {
    /// GFD: the GPU product (`NVIDIA-A100-SXM4-80GB`).
    pub product: String,
    /// GFD: memory per GPU, MiB.
    pub memory: String,
    /// GFD: GPUs on the node (a node with it above 0 has GPU labels).
    pub count: String,
    /// GFD: `none`, `single`, `mixed`.
    pub mig_strategy: String,
    /// GFD: driver version, in parts.
    pub driver_major: String,
    pub driver_minor: String,
    pub driver_rev: String,
    /// GFD: the CUDA version the driver supports, in parts.
    pub cuda_major: String,
    pub cuda_minor: String,
    /// AMD: the product name.
    pub amd_product: String,
    /// AMD: memory per GPU with a unit (`191G`; `M`, `G`, `T` read as MiB, GiB, TiB).
    pub amd_memory: String,
    /// AMD: the driver version (`6.8.5`).
    pub amd_driver: String,
    /// Intel: the product (`Max_1550`).
    pub intel_product: String,
    /// Intel: memory of all the node's GPUs together, bytes.
    pub intel_memory_total: String,
    /// Intel: GPUs on the node (divides `intelMemoryTotal`).
    pub intel_count: String,
    /// GFD (MIG strategy `mixed`): memory of one MIG device of a profile, MiB; the key with
    /// `<profile>` where the profile goes (`nvidia.com/mig-<profile>.memory`).
    pub mig_memory: String,
}

impl Default for LabelKeys {
    fn default() -> Self {
        LabelKeys {
            product: "nvidia.com/gpu.product".into(),
            memory: "nvidia.com/gpu.memory".into(),
            count: "nvidia.com/gpu.count".into(),
            mig_strategy: "nvidia.com/mig.strategy".into(),
            driver_major: "nvidia.com/cuda.driver.major".into(),
            driver_minor: "nvidia.com/cuda.driver.minor".into(),
            driver_rev: "nvidia.com/cuda.driver.rev".into(),
            cuda_major: "nvidia.com/cuda.runtime.major".into(),
            cuda_minor: "nvidia.com/cuda.runtime.minor".into(),
            amd_product: "amd.com/gpu.product-name".into(),
            amd_memory: "amd.com/gpu.vram".into(),
            amd_driver: "amd.com/gpu.driver-version".into(),
            intel_product: "gpu.intel.com/product".into(),
            intel_memory_total: "gpu.intel.com/memory.max".into(),
            intel_count: "gpu.intel.com/device.count".into(),
            mig_memory: DEFAULT_MIG_MEMORY.into(),
        }
    }
}

/// Index of each key in [`LabelKeys::all`].
pub(super) mod at {
    pub const PRODUCT: usize = 0;
    pub const MEMORY: usize = 1;
    pub const COUNT: usize = 2;
    pub const MIG_STRATEGY: usize = 3;
    pub const DRIVER: [usize; 3] = [4, 5, 6];
    pub const CUDA: [usize; 2] = [7, 8];
    pub const AMD_PRODUCT: usize = 9;
    pub const AMD_MEMORY: usize = 10;
    pub const AMD_DRIVER: usize = 11;
    pub const INTEL_PRODUCT: usize = 12;
    pub const INTEL_MEMORY_TOTAL: usize = 13;
    pub const INTEL_COUNT: usize = 14;
    pub const N: usize = 15;
}

impl LabelKeys {
    /// Every key with its settings name, in the order of [`at`].
    pub fn named(&self) -> [(&'static str, &str); at::N] {
        [
            ("product", &self.product),
            ("memory", &self.memory),
            ("count", &self.count),
            ("migStrategy", &self.mig_strategy),
            ("driverMajor", &self.driver_major),
            ("driverMinor", &self.driver_minor),
            ("driverRev", &self.driver_rev),
            ("cudaMajor", &self.cuda_major),
            ("cudaMinor", &self.cuda_minor),
            ("amdProduct", &self.amd_product),
            ("amdMemory", &self.amd_memory),
            ("amdDriver", &self.amd_driver),
            ("intelProduct", &self.intel_product),
            ("intelMemoryTotal", &self.intel_memory_total),
            ("intelCount", &self.intel_count),
        ]
    }

    /// Every key, in the order of [`at`].
    pub fn all(&self) -> [&str; at::N] {
        self.named().map(|(_, k)| k)
    }

    /// Each key empty or a valid label key (`migMemory`: with `<profile>` once, a valid key
    /// once a profile is put there); errors name `<field>.<key>`.
    pub fn validate(&self, field: &str) -> Result<(), FieldError> {
        for (name, key) in self.named() {
            if !key.is_empty() {
                validate_label_key(&format!("{field}.{name}"), key)?;
            }
        }
        if !self.mig_memory.is_empty() {
            let f = format!("{field}.migMemory");
            if self.mig_memory.matches(PROFILE).count() != 1 {
                return Err(FieldError::new(
                    f,
                    format!(
                        "'{}' must hold {PROFILE} once, where the MIG profile goes (like {DEFAULT_MIG_MEMORY})",
                        self.mig_memory
                    ),
                ));
            }
            validate_label_key(&f, &self.mig_memory.replace(PROFILE, "1g.10gb"))?;
        }
        Ok(())
    }

    /// The part of `key` where `migMemory` holds the profile, when `key` is a MIG memory
    /// label (`nvidia.com/mig-1g.10gb.memory` -> `1g.10gb`).
    pub fn mig_profile_of<'k>(&self, key: &'k str) -> Option<&'k str> {
        let (before, after) = self.mig_memory.split_once(PROFILE)?;
        key.strip_prefix(before)?
            .strip_suffix(after)
            .filter(|p| !p.is_empty())
    }
}
