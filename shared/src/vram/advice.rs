//! The fixes a rejection proposes: the GPU count that fits on the requested product, and
//! the larger products (or pools) that fit with the fewest GPUs.
//!
//! Counts are per pod, keeping the unit's number of GPU pods; a count must be a tensor
//! parallel size that divides the model's attention heads when the registry gives them,
//! and at most `maxGpusPerPod`. The need is re-estimated for every count (KV heads are
//! replicated when the count exceeds them).

use super::catalog::model::{Dtype, Model, Need};
use super::catalog::products::STANDARD_MIG_PROFILES;
use super::memory::{Slice, usable_per_device};
use super::numbers::{Round, gib, percent_of};
use super::settings::{Config, Target};
use crate::gpu::MIG_PREFIX;

/// What the unit asks for today, as the advice needs it.
pub struct Shape<'a> {
    /// Pods with GPUs in one unit.
    pub gpu_pods: u64,
    /// The first GPU resource of the unit (whole GPUs preferred over MIG).
    pub current: Option<&'a Slice>,
    /// Several pods: counts are said "per pod".
    pub group: bool,
    /// Percent of each GPU's memory the server uses.
    pub usable: u64,
}

/// The smallest GPU count per pod that fits, if any up to `max`.
pub fn count_for(
    model: &Model,
    gpu_pods: u64,
    mib_per_gpu: u64,
    usable: u64,
    max: u64,
    respect_tp: bool,
) -> Option<u64> {
    (1..=max).find(|&n| {
        (!respect_tp || model.tp_ok(n))
            && model.estimate(n).total_mib
                <= usable_per_device(gpu_pods.saturating_mul(n), mib_per_gpu, usable)
    })
}

/// The advice sentence(s) for a model that does not fit.
pub fn advise(
    model: &Model,
    shape: &Shape<'_>,
    config: &Config,
    product_label_key: &str,
    pool_label_key: &str,
) -> String {
    let max = config.max_gpus_per_pod;
    let usable = shape.usable;
    let pods = shape.gpu_pods.max(1);
    let per = if shape.group { " per pod" } else { "" };
    // The count that fits on a GPU of `mib`, and whether the attention heads raised it.
    let fit = |mib: u64| {
        let n = count_for(model, pods, mib, usable, max, true)?;
        Some((
            n,
            Some(n) != count_for(model, pods, mib, usable, max, false),
        ))
    };
    let mut tp_mattered = false;

    let current = shape.current;
    if let Some((slice, share)) = current.and_then(|s| s.share.as_ref().map(|sh| (s, sh))) {
        return share_advice(model, pods, slice, share, usable);
    }
    let mig = current.filter(|s| s.device.mig.is_some());
    let whole = current.filter(|s| s.device.mig.is_none());
    let resource = match whole {
        Some(s) if !s.resource.starts_with("nvidia.com/") => s.resource.clone(),
        _ => "nvidia.com/gpu".to_string(),
    };
    let nvidia = resource == "nvidia.com/gpu";

    let mut sentences = Vec::new();
    let mut options: Vec<String> = Vec::new();
    let mut mig_option: Option<String> = None;

    if let Some(s) = whole.filter(|s| !s.device.shared) {
        match fit(s.device.mib) {
            Some((n, raised)) => {
                tp_mattered |= raised;
                options.push(format!("{n}{per} on {}", s.label));
            }
            None => {
                sentences.push(format!(
                    "It does not fit on {} with up to {max} GPUs per pod.",
                    s.label
                ));
            }
        }
    }
    if let Some(s) = mig
        && pods == 1
        && let Some(profile) = STANDARD_MIG_PROFILES.iter().find(|p| {
            // Larger than the profile asked for by the catalog too: its nodes may report
            // less memory than the catalog gives it.
            let asked = s
                .device
                .mig
                .as_deref()
                .and_then(|m| config.catalog.mig_profile(m));
            config.catalog.mig_profile(p).is_some_and(|mib| {
                mib > s.device.mib.max(asked.unwrap_or(0))
                    && model.estimate(1).total_mib <= percent_of(mib, usable)
            })
        })
    {
        mig_option = Some(format!("{MIG_PREFIX}{profile}: 1"));
    }

    let current_mib = current.map(|s| s.device.mib).unwrap_or(0);
    let current_product = whole.and_then(|s| s.product.clone());
    let mut alternatives: Vec<(u64, bool, &Target)> = Vec::new();
    if nvidia {
        for t in config.targets() {
            if t.mib <= current_mib || Some(&t.product) == current_product.as_ref() {
                continue;
            }
            if let Some((n, raised)) = fit(t.mib) {
                alternatives.push((n, raised, t));
            }
        }
    }
    alternatives.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| a.2.mib.cmp(&b.2.mib))
            .then_with(|| a.2.product.cmp(&b.2.product))
            .then_with(|| a.2.pool.cmp(&b.2.pool))
    });
    // Two alternatives with different memory (products of equal memory say the same).
    let mut shown_mib: Vec<u64> = Vec::new();
    for (n, raised, t) in alternatives {
        if shown_mib.len() >= 2 {
            break;
        }
        if shown_mib.contains(&t.mib) {
            continue;
        }
        shown_mib.push(t.mib);
        tp_mattered |= raised;
        options.push(match &t.pool {
            Some(pool) => format!("{n}{per} in pool {pool} ({})", t.product),
            None => format!("{n}{per} on {}", t.product),
        });
    }

    if options.is_empty() && mig_option.is_none() {
        let mut s = format!(
            "{} fits it with up to {max} GPUs per pod{}: serve it on more pods (LeaderWorkerSet, KServe multi-node), lower its contextLength or concurrency",
            if config.targets().iter().any(|t| t.pool.is_some()) {
                "No pool's GPU"
            } else {
                "No GPU the policy knows"
            },
            if pods > 1 {
                format!(" over {pods} pods")
            } else {
                String::new()
            }
        );
        if let Need::Estimate(d) = &model.need
            && d.dtype.bits() > Dtype::Fp8.bits()
            && let Some(fp8) = model.with_dtype(Dtype::Fp8)
        {
            s.push_str(&format!(
                ", or quantize it (fp8 weights: ~{})",
                gib(fp8.estimate(1).total_mib, Round::Up)
            ));
        }
        s.push('.');
        sentences.push(s);
        return sentences.join(" ");
    }
    let selector = if config.targets().iter().any(|t| t.pool.is_some()) {
        format!("pod label {pool_label_key}")
    } else {
        format!("nodeSelector {product_label_key}")
    };
    let mut text = match (&mig_option, options.is_empty()) {
        (Some(m), true) => format!("Request {m}"),
        (Some(m), false) => format!("Request {m}, or {resource}: {}", join_or(&options)),
        (None, _) => format!("Request {resource}: {}", join_or(&options)),
    };
    if !shown_mib.is_empty() {
        text.push_str(&format!(" ({selector})"));
    }
    if tp_mattered && let Some(h) = model.attention_heads {
        text.push_str(&format!(
            "; counts are tensor-parallel sizes that divide the model's {h} attention heads"
        ));
    }
    text.push('.');
    sentences.push(text);
    sentences.join(" ")
}

/// The advice for a pod on a fractional-GPU share that is too small: the memory of each
/// device a share must give (more pods or GPUs of the same share hold no more of the
/// model per device than the scheduler grants), or whole GPUs.
fn share_advice(
    model: &Model,
    pods: u64,
    slice: &Slice,
    share: &crate::fractional::Share,
    usable: u64,
) -> String {
    let per_pod = slice.effective_count().max(1);
    let devices = pods.saturating_mul(per_pod).max(1);
    let per_device = model.estimate(per_pod).total_mib.div_ceil(devices);
    let mib = u64::try_from((u128::from(per_device) * 100).div_ceil(u128::from(usable.max(1))))
        .unwrap_or(u64::MAX);
    format!(
        "It does not fit in {share}: ask the scheduler for at least {mib} MiB of each GPU ({usable}% of it usable), or for whole GPUs without a share."
    )
}

fn join_or(options: &[String]) -> String {
    options.join(", or ")
}

#[cfg(test)]
mod tests {
    use super::super::catalog::model::tests::model;
    use super::super::catalog::products::{DeviceMemory, GpuCatalog};
    use super::super::memory::ProductSource;
    use super::super::settings::Settings;
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn llama_70b() -> Model {
        model(
            json!({"parametersBillions": 70.6, "dtype": "bf16", "layers": 80, "kvHeads": 8,
                     "headDim": 128, "contextLength": 8192, "concurrency": 8, "attentionHeads": 64}),
        )
    }

    fn slice(label: &str, resource: &str, count: u64) -> Slice {
        let catalog = GpuCatalog::default();
        let device = catalog
            .product(label)
            .or_else(|| catalog.mig_resource(resource))
            .unwrap();
        Slice {
            resource: resource.into(),
            count,
            label: label.into(),
            product: device.mig.is_none().then(|| label.to_string()),
            device,
            source: ProductSource::Selector,
            share: None,
            memory_from: None,
        }
    }

    fn config(v: Value) -> Config {
        serde_json::from_value::<Settings>(v)
            .unwrap()
            .check()
            .unwrap()
    }

    fn advice(model: &Model, current: Option<&Slice>, pods: u64, settings: Value) -> String {
        advise(
            model,
            &Shape {
                gpu_pods: pods,
                current,
                group: pods > 1,
                usable: 90,
            },
            &config(settings),
            "nvidia.com/gpu.product",
            "gpu-admission/pool",
        )
    }

    #[test]
    fn design_example_llama_70b_on_a10g() {
        let a10g = slice("NVIDIA-A10G", "nvidia.com/gpu", 2);
        // Need 170,653 MiB (gpu.md figures, 8 x 8k tokens); 8 A10G give 8 x 23,028 x 90% =
        // 165,800 MiB, and maxGpusPerPod is 8. Two H100 NVL give 172,494 MiB.
        let text = advice(&llama_70b(), Some(&a10g), 1, json!({}));
        assert_eq!(
            text,
            "It does not fit on NVIDIA-A10G with up to 8 GPUs per pod. Request nvidia.com/gpu: 2 on NVIDIA-H100-NVL, or 2 on NVIDIA-H200 (nodeSelector nvidia.com/gpu.product)."
        );
    }

    /// The advice for a model needing `need` on one GPU `current` (label, resource) per pod,
    /// over `pods` pods, with `settings`.
    #[rstest]
    #[case::same_product_first_then_larger_ones(("NVIDIA-L4", "nvidia.com/gpu"),
        json!({"vramGiB": 30, "attentionHeads": 32}), 1, json!({}),
        "Request nvidia.com/gpu: 2 on NVIDIA-L4, or 1 on NVIDIA-A100-SXM4-40GB, or 1 on NVIDIA-L40S (nodeSelector nvidia.com/gpu.product).")]
    // 50 GiB on L4s (20.2 GiB usable each): 3 would fit, but 40 heads take 2, 4, 5, 8...
    #[case::tensor_parallel_sizes_divide_the_attention_heads(("NVIDIA-L4", "nvidia.com/gpu"),
        json!({"vramGiB": 50, "attentionHeads": 40}), 1, json!({"suggestProducts": ["NVIDIA-L4"]}),
        "Request nvidia.com/gpu: 4 on NVIDIA-L4; counts are tensor-parallel sizes that divide the model's 40 attention heads.")]
    #[case::pools_are_suggested_when_configured(("NVIDIA-A10G", "nvidia.com/gpu"),
        json!({"vramGiB": 100}), 1,
        json!({"poolProducts": {"small": "NVIDIA-A10G", "big": "NVIDIA-H100-80GB-HBM3", "huge": "NVIDIA-H200"}}),
        "Request nvidia.com/gpu: 5 on NVIDIA-A10G, or 1 in pool huge (NVIDIA-H200), or 2 in pool big (NVIDIA-H100-80GB-HBM3) (pod label gpu-admission/pool).")]
    #[case::groups_count_per_pod(("NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu"),
        json!({"vramGiB": 600}), 4, json!({"suggestProducts": ["NVIDIA-H200"]}),
        "Request nvidia.com/gpu: 3 per pod on NVIDIA-H100-80GB-HBM3, or 2 per pod on NVIDIA-H200 (nodeSelector nvidia.com/gpu.product).")]
    #[case::mig_suggests_a_larger_profile_and_whole_gpus(("MIG 1g.10gb", "nvidia.com/mig-1g.10gb"),
        json!({"vramGiB": 15}), 1, json!({"suggestProducts": ["NVIDIA-L4"]}),
        "Request nvidia.com/mig-1g.18gb: 1, or nvidia.com/gpu: 1 on NVIDIA-L4 (nodeSelector nvidia.com/gpu.product).")]
    #[case::nothing_fits_suggests_sharding_or_quantizing(("Tesla-T4", "nvidia.com/gpu"),
        json!({"parametersBillions": 405, "dtype": "bf16"}), 1, json!({"suggestProducts": ["NVIDIA-L4"]}),
        "It does not fit on Tesla-T4 with up to 8 GPUs per pod. No GPU the policy knows fits it with up to 8 GPUs per pod: serve it on more pods (LeaderWorkerSet, KServe multi-node), lower its contextLength or concurrency, or quantize it (fp8 weights: ~415 GiB).")]
    #[case::nothing_fits_in_any_pool(("NVIDIA-L4", "nvidia.com/gpu"),
        json!({"parametersBillions": 671, "dtype": "fp8"}), 1,
        json!({"poolProducts": {"l4": "NVIDIA-L4", "h100": "NVIDIA-H100-80GB-HBM3"}}),
        "It does not fit on NVIDIA-L4 with up to 8 GPUs per pod. No pool's GPU fits it with up to 8 GPUs per pod: serve it on more pods (LeaderWorkerSet, KServe multi-node), lower its contextLength or concurrency.")]
    fn advises(
        #[case] (label, resource): (&str, &str),
        #[case] need: Value,
        #[case] pods: u64,
        #[case] settings: Value,
        #[case] text: &str,
    ) {
        let current = slice(label, resource, 1);
        assert_eq!(advice(&model(need), Some(&current), pods, settings), text);
    }

    #[test]
    fn other_vendors_get_only_their_own_count() {
        let mut amd = slice("NVIDIA-L4", "amd.com/gpu", 1);
        amd.label = "MI300X".into();
        amd.product = Some("MI300X".into());
        amd.device = DeviceMemory {
            mib: 196608,
            shared: false,
            mig: None,
        };
        let m = model(json!({"vramGiB": 300}));
        assert_eq!(
            advice(&m, Some(&amd), 1, json!({})),
            "Request amd.com/gpu: 2 on MI300X."
        );
    }

    #[test]
    fn count_for_finds_the_smallest() {
        let m = model(json!({"vramGiB": 40}));
        assert_eq!(count_for(&m, 1, 23028, 90, 8, true), Some(2));
        assert_eq!(count_for(&m, 2, 23028, 90, 8, true), Some(1));
        assert_eq!(count_for(&m, 1, 1024, 90, 8, true), None);
    }

    /// A fractional share that is too small: the advice is the memory a share must give
    /// each GPU, not more of the same share (`N on 3000 MiB of one GPU through HAMi`).
    #[test]
    fn a_share_too_small_asks_for_a_larger_share() {
        use crate::fractional::{Portion, Scheduler, Share};
        let mut l4 = slice("NVIDIA-L4", "nvidia.com/gpu", 1);
        let hami = Share {
            scheduler: Scheduler::Hami,
            devices: 1,
            portion: Portion::MemoryMib(3000),
        };
        l4.device.mib = 3000;
        l4.label = format!("{hami} on NVIDIA-L4");
        l4.share = Some(hami);
        let m = model(json!({"vramGiB": 18}));
        // 18 GiB = 18,432 MiB at 90%: 20,480 MiB of the GPU.
        assert_eq!(
            advice(&m, Some(&l4), 1, json!({})),
            "It does not fit in 3000 MiB of one GPU through HAMi: ask the scheduler for at least 20480 MiB of each GPU (90% of it usable), or for whole GPUs without a share."
        );
        // KAI, half of each of 2 GPUs, over 2 pods: 18,432 MiB / 4 devices = 4,608 per GPU.
        let kai = Share {
            scheduler: Scheduler::Kai,
            devices: 2,
            portion: Portion::Milli(500),
        };
        let mut h100 = slice("NVIDIA-L4", "nvidia.com/gpu", 2);
        h100.share = Some(kai);
        assert_eq!(
            advice(&m, Some(&h100), 2, json!({})),
            "It does not fit in 0.5 of each of 2 GPUs through KAI Scheduler: ask the scheduler for at least 5120 MiB of each GPU (90% of it usable), or for whole GPUs without a share."
        );
    }
}
