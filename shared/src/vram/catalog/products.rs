//! GPU products and their memory.
//!
//! Products are named as NVIDIA GPU Feature Discovery labels them (`nvidia.com/gpu.product`:
//! the NVML name with spaces turned into `-`). Memory is per GPU, in MiB: the value GFD
//! reports in `nvidia.com/gpu.memory` where it has been observed, otherwise the marketing
//! GB x 1024 (an overestimate of a few percent: NVML reports less than the marketing
//! figure, which is why fit checks also apply a usable percentage). Settings add or
//! override products (`gpuProducts`) and MIG profiles (`migProfiles`).
//!
//! Name forms understood on top of the table:
//! - `<product>-SHARED`: the product under time-slicing; replicas share one GPU's memory.
//! - `<product>-MIG-<profile>` (MIG single strategy): one MIG device of `<profile>`.

use crate::gpu::{MIG_PREFIX, MigProfile};
use std::collections::BTreeMap;

/// Where a built-in figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `nvidia.com/gpu.memory` as GFD reported it on a real node.
    Observed,
    /// Marketing GB x 1024.
    Nominal,
}

/// A built-in product: GFD name, MiB per GPU, where the figure comes from.
pub struct BuiltinProduct {
    pub name: &'static str,
    pub mib: u64,
    pub source: Source,
}

const fn observed(name: &'static str, mib: u64) -> BuiltinProduct {
    BuiltinProduct {
        name,
        mib,
        source: Source::Observed,
    }
}

const fn nominal(name: &'static str, gb: u64) -> BuiltinProduct {
    BuiltinProduct {
        name,
        mib: gb * 1024,
        source: Source::Nominal,
    }
}

/// The built-in catalog, smallest memory first.
pub const BUILTIN_PRODUCTS: &[BuiltinProduct] = &[
    observed("Tesla-T4", 15360),
    nominal("Tesla-V100-SXM2-16GB", 16),
    nominal("Tesla-V100-PCIE-16GB", 16),
    nominal("Tesla-P100-PCIE-16GB", 16),
    observed("NVIDIA-A10G", 23028),
    observed("NVIDIA-L4", 23034),
    nominal("NVIDIA-A10", 24),
    nominal("NVIDIA-A30", 24),
    nominal("Tesla-V100-SXM2-32GB", 32),
    nominal("Tesla-V100-PCIE-32GB", 32),
    nominal("NVIDIA-A100-SXM4-40GB", 40),
    nominal("NVIDIA-A100-PCIE-40GB", 40),
    observed("NVIDIA-L40S", 46068),
    nominal("NVIDIA-L40", 48),
    nominal("NVIDIA-A40", 48),
    nominal("NVIDIA-RTX-A6000", 48),
    nominal("NVIDIA-RTX-6000-Ada-Generation", 48),
    observed("NVIDIA-H100-80GB-HBM3", 81559),
    observed("NVIDIA-H100-PCIe", 81559),
    observed("NVIDIA-A100-SXM4-80GB", 81920),
    observed("NVIDIA-A100-80GB-PCIe", 81920),
    observed("NVIDIA-H100-NVL", 95830),
    nominal("NVIDIA-GH200-480GB", 96),
    nominal("NVIDIA-H200", 141),
    nominal("NVIDIA-H200-NVL", 141),
    nominal("NVIDIA-B200", 180),
];

/// Built-in products suggestions name by default: current data-center GPUs (older or
/// rarer ones stay in the catalog for lookups, and settings can list any in
/// `suggestProducts`).
pub const DEFAULT_SUGGESTIONS: &[&str] = &[
    "NVIDIA-L4",
    "NVIDIA-A10G",
    "NVIDIA-L40S",
    "NVIDIA-A100-SXM4-40GB",
    "NVIDIA-A100-SXM4-80GB",
    "NVIDIA-H100-80GB-HBM3",
    "NVIDIA-H100-NVL",
    "NVIDIA-H200",
    "NVIDIA-B200",
];

/// MIG profiles whose device memory has been observed (GFD `nvidia.com/mig-<P>.memory`).
pub const OBSERVED_MIG_PROFILES: &[(&str, u64)] = &[("7g.40gb", 40192)];

/// Standard MIG profiles (NVIDIA MIG user guide), smallest memory first; suggestions pick
/// from these.
pub const STANDARD_MIG_PROFILES: &[&str] = &[
    "1g.5gb", "1g.6gb", "1g.10gb", "2g.10gb", "1g.12gb", "2g.12gb", "1g.18gb", "1g.20gb",
    "2g.20gb", "3g.20gb", "4g.20gb", "1g.23gb", "1g.24gb", "2g.24gb", "4g.24gb", "1g.35gb",
    "2g.35gb", "3g.40gb", "4g.40gb", "7g.40gb", "1g.45gb", "2g.45gb", "3g.47gb", "4g.47gb",
    "3g.71gb", "4g.71gb", "7g.80gb", "3g.90gb", "4g.90gb", "7g.94gb", "7g.141gb", "7g.180gb",
];

/// Suffix GFD appends to the product under time-slicing (unless `renameByDefault`).
pub const SHARED_SUFFIX: &str = "-SHARED";
/// Infix of MIG single-strategy products: `A100-SXM4-40GB-MIG-1g.5gb`.
pub const MIG_INFIX: &str = "-MIG-";

/// What one GPU (or MIG device) of a product holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceMemory {
    /// MiB per device.
    pub mib: u64,
    /// Time-sliced: every replica sees the same physical GPU's memory.
    pub shared: bool,
    /// The MIG profile when the device is a MIG slice (`3g.40gb`).
    pub mig: Option<String>,
}

/// Products and MIG profiles, built in plus settings.
#[derive(Debug, Clone, Default)]
pub struct GpuCatalog {
    products: BTreeMap<String, u64>,
    mig_profiles: BTreeMap<String, u64>,
}

impl GpuCatalog {
    /// The built-in catalog with `products` and `mig_profiles` (MiB) added or overriding.
    pub fn new(products: BTreeMap<String, u64>, mig_profiles: BTreeMap<String, u64>) -> Self {
        GpuCatalog {
            products,
            mig_profiles,
        }
    }

    /// MiB of one GPU of `product` as GFD names it, including the `-SHARED` and
    /// `-MIG-<profile>` forms. `None` when unknown.
    pub fn product(&self, product: &str) -> Option<DeviceMemory> {
        if let Some(mib) = self.exact(product) {
            return Some(DeviceMemory {
                mib,
                shared: false,
                mig: None,
            });
        }
        if let Some(base) = product.strip_suffix(SHARED_SUFFIX) {
            return self
                .product(base)
                .map(|m| DeviceMemory { shared: true, ..m });
        }
        if let Some((_, profile)) = product.rsplit_once(MIG_INFIX) {
            return self.mig_profile(profile).map(|mib| DeviceMemory {
                mib,
                shared: false,
                mig: Some(profile.to_string()),
            });
        }
        None
    }

    /// Whether `product` is one of the catalog's names (built in or from settings), or its
    /// `-SHARED` form: a fixed set, unlike the `-MIG-<profile>` forms [`Self::product`]
    /// also reads.
    pub fn is_listed(&self, product: &str) -> bool {
        let base = product.strip_suffix(SHARED_SUFFIX).unwrap_or(product);
        self.exact(base).is_some()
    }

    fn exact(&self, product: &str) -> Option<u64> {
        self.products.get(product).copied().or_else(|| {
            BUILTIN_PRODUCTS
                .iter()
                .find(|p| p.name == product)
                .map(|p| p.mib)
        })
    }

    /// MiB of one MIG device of `profile` (`3g.40gb`): settings, then an observed figure,
    /// then the nominal GB x 1024 from the name. `None` when it is not a profile name.
    pub fn mig_profile(&self, profile: &str) -> Option<u64> {
        let parsed = MigProfile::from_profile(profile)?;
        // The name as given, then as NVIDIA writes it (`03g.40gb` is `3g.40gb`).
        let set = |name: &str| self.mig_profiles.get(name).copied();
        let canonical = || match self.mig_profiles.is_empty() {
            true => None,
            false => set(&format!("{}g.{}gb", parsed.slices, parsed.memory_gb)),
        };
        set(profile)
            .or_else(canonical)
            .or_else(|| {
                OBSERVED_MIG_PROFILES
                    .iter()
                    .find(|(p, _)| MigProfile::from_profile(p) == Some(parsed))
                    .map(|(_, mib)| *mib)
            })
            .or(Some(u64::from(parsed.memory_gb) * 1024))
    }

    /// MiB of one device of a MIG resource (`nvidia.com/mig-3g.40gb`).
    pub fn mig_resource(&self, resource: &str) -> Option<DeviceMemory> {
        let profile = resource.strip_prefix(MIG_PREFIX)?;
        let (profile, shared) = match profile.strip_suffix(".shared") {
            Some(p) => (p, true),
            None => (profile, false),
        };
        self.mig_profile(profile).map(|mib| DeviceMemory {
            mib,
            shared,
            mig: Some(profile.to_string()),
        })
    }

    /// Whole-GPU products worth suggesting (no `-SHARED` or MIG forms), with their MiB,
    /// smallest first: [`DEFAULT_SUGGESTIONS`] and every product from settings (which
    /// also override built-in figures).
    pub fn suggestable(&self) -> Vec<(String, u64)> {
        let mut all: BTreeMap<String, u64> = BUILTIN_PRODUCTS
            .iter()
            .filter(|p| DEFAULT_SUGGESTIONS.contains(&p.name))
            .map(|p| (p.name.to_string(), p.mib))
            .collect();
        all.extend(self.products.iter().map(|(k, v)| (k.clone(), *v)));
        let mut list: Vec<(String, u64)> = all
            .into_iter()
            .filter(|(name, _)| !name.ends_with(SHARED_SUFFIX) && !name.contains(MIG_INFIX))
            .collect();
        list.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn catalog() -> GpuCatalog {
        GpuCatalog::new(
            BTreeMap::from([
                ("Custom-GPU-64GB".to_string(), 65536),
                ("NVIDIA-L4".to_string(), 22888),
            ]),
            BTreeMap::from([("1g.12gb".to_string(), 11008)]),
        )
    }

    #[rstest]
    #[case::observed_a10g("NVIDIA-A10G", 23028)]
    #[case::observed_h100("NVIDIA-H100-80GB-HBM3", 81559)]
    #[case::observed_nvl("NVIDIA-H100-NVL", 95830)]
    #[case::observed_t4("Tesla-T4", 15360)]
    #[case::nominal_a100_40("NVIDIA-A100-SXM4-40GB", 40960)]
    #[case::nominal_h200("NVIDIA-H200", 144384)]
    #[case::settings_add("Custom-GPU-64GB", 65536)]
    #[case::settings_override("NVIDIA-L4", 22888)]
    fn products(#[case] name: &str, #[case] mib: u64) {
        let m = catalog().product(name).unwrap();
        assert_eq!(m.mib, mib);
        assert!(!m.shared);
        assert_eq!(m.mig, None);
    }

    #[test]
    fn shared_products_have_the_base_memory_and_are_marked() {
        let m = catalog().product("NVIDIA-A10G-SHARED").unwrap();
        assert_eq!((m.mib, m.shared), (23028, true));
    }

    #[rstest]
    #[case::single_strategy("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", 5120, "1g.5gb")]
    #[case::observed("A100-SXM4-40GB-MIG-7g.40gb", 40192, "7g.40gb")]
    #[case::override_from_settings("NVIDIA-H100-NVL-MIG-1g.12gb", 11008, "1g.12gb")]
    fn mig_single_strategy_products(#[case] name: &str, #[case] mib: u64, #[case] profile: &str) {
        let m = catalog().product(name).unwrap();
        assert_eq!(m.mib, mib);
        assert_eq!(m.mig.as_deref(), Some(profile));
    }

    #[rstest]
    #[case::nominal("nvidia.com/mig-3g.40gb", Some((40960, false)))]
    #[case::observed("nvidia.com/mig-7g.40gb", Some((40192, false)))]
    #[case::shared("nvidia.com/mig-1g.10gb.shared", Some((10240, true)))]
    #[case::settings("nvidia.com/mig-1g.12gb", Some((11008, false)))]
    #[case::not_mig("nvidia.com/gpu", None)]
    #[case::garbage("nvidia.com/mig-big", None)]
    fn mig_resources(#[case] resource: &str, #[case] expected: Option<(u64, bool)>) {
        assert_eq!(
            catalog().mig_resource(resource).map(|m| (m.mib, m.shared)),
            expected
        );
    }

    #[rstest]
    #[case::unknown("NVIDIA-Z9000")]
    #[case::empty("")]
    #[case::lowercase("nvidia-a10g")]
    #[case::bad_mig("NVIDIA-A100-MIG-huge")]
    fn unknown_products(#[case] name: &str) {
        assert_eq!(catalog().product(name), None);
    }

    #[test]
    fn suggestable_products_are_sorted_and_skip_variants() {
        let mut c = catalog();
        c.products.insert("X-SHARED".into(), 1);
        let list = c.suggestable();
        assert_eq!(list[0], ("NVIDIA-L4".to_string(), 22888));
        assert!(
            !list.iter().any(|(n, _)| n == "Tesla-T4"),
            "not suggested by default"
        );
        assert!(list.windows(2).all(|w| w[0].1 <= w[1].1));
        assert!(list.iter().all(|(n, _)| !n.ends_with("-SHARED")));
        assert!(list.contains(&("Custom-GPU-64GB".to_string(), 65536)));
        assert!(list.contains(&("NVIDIA-L4".to_string(), 22888)));
    }

    #[test]
    fn builtin_table_is_sorted_and_unique() {
        assert!(
            BUILTIN_PRODUCTS.windows(2).all(|w| w[0].mib <= w[1].mib),
            "smallest first"
        );
        for (i, p) in BUILTIN_PRODUCTS.iter().enumerate() {
            assert!(
                BUILTIN_PRODUCTS[..i].iter().all(|o| o.name != p.name),
                "{} listed twice",
                p.name
            );
        }
        for p in DEFAULT_SUGGESTIONS {
            assert!(BUILTIN_PRODUCTS.iter().any(|b| b.name == *p), "{p}");
        }
        for p in STANDARD_MIG_PROFILES {
            assert!(GpuCatalog::default().mig_profile(p).is_some(), "{p}");
        }
    }

    #[test]
    fn mig_profile_memory_from_settings_observed_or_nominal() {
        let builtin = GpuCatalog::default();
        assert_eq!(builtin.mig_profile("7g.40gb"), Some(40192), "observed");
        assert_eq!(
            builtin.mig_profile("07g.040gb"),
            Some(40192),
            "observed, as NVIDIA writes it"
        );
        assert_eq!(builtin.mig_profile("3g.40gb"), Some(40 * 1024), "nominal");
        assert_eq!(builtin.mig_profile("3g.40gb.shared"), Some(40 * 1024));
        for not_a_profile in ["", "3g", "g.40gb", "3g.40", "x3g.40gb", "12345g.1gb"] {
            assert_eq!(builtin.mig_profile(not_a_profile), None, "{not_a_profile}");
        }
        let set = GpuCatalog::new(
            BTreeMap::new(),
            BTreeMap::from([
                ("3g.40gb".to_string(), 39_000),
                ("7g.40gb".to_string(), 40_000),
            ]),
        );
        assert_eq!(set.mig_profile("3g.40gb"), Some(39_000));
        assert_eq!(
            set.mig_profile("03g.40gb"),
            Some(39_000),
            "its name as NVIDIA writes it"
        );
        assert_eq!(
            set.mig_profile("7g.40gb"),
            Some(40_000),
            "settings before observed"
        );
        assert_eq!(set.mig_profile("1g.10gb"), Some(10 * 1024));
    }
}
