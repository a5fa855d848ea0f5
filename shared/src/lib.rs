//! The rules of gpu-admission, shared by every policy.
//!
//! Everything that decides lives here as pure functions over plain data, so it is
//! unit-tested natively and (the same tests) compiled to wasm32-wasip1. Policies parse
//! their settings, call into this crate and turn the result into accept / reject / mutate.
//!
//! - [`limits`]: every bound on what the policies read (payload size, JSON values,
//!   pod templates, containers), in one place.
//! - [`quantity`]: Kubernetes resource quantities, parsed exactly.
//! - [`workload`]: every pod template an admitted object carries, and writing one back.
//! - [`podspec`]: the few PodSpec fields the rules read, as lenient serde types.
//! - [`gpu`]: GPU resource names and the GPU demand of a pod.
//! - [`scheduling`]: node selectors, required node affinity and tolerations.
//! - [`selector`]: label selectors, matched and as query strings.
//! - [`settings`]: settings fragments that several policies share, with validation.
//! - [`admission`]: the admission request as the rules read it, and the [`admission::Verdict`].
//! - [`cluster`]: context-aware host calls as data, behind the [`cluster::Cluster`] trait,
//!   and their failures worded by class; [`lists`]: reading list answers item by item.
//! - [`pools`]: the pools of GPU nodes one `pools` block describes to the capacity gate
//!   and the autoscaler policy, and reading what a pool offers.
//! - [`policy`]: what every policy shares at admission (the [`policy::Policy`] trait: settings
//!   checked once, the shared opening, the one way to run a policy), importing no policy.
//! - [`labels`], [`routing`], [`vram`], [`capacity`], [`autoscaler`]: the rules of the five
//!   policies, each with its `impl Policy` beside them (`labels/policy.rs`, ...);
//!   [`policies`]: the five, as the policy crates register them.
//! - `kubewarden` (feature `kubewarden`): the waPC glue every policy registers; [`arena`]:
//!   the policy modules' allocator for what one request allocates; [`bytes`]: comparing
//!   long byte strings there.

pub mod admission;
pub mod arena;
pub mod autoscaler;
pub mod bytes;
pub mod capacity;
pub mod clock;
pub mod cluster;
pub mod dra;
pub mod exceptions;
pub mod fractional;
pub mod gpu;
pub mod inventory;
#[cfg(feature = "kubewarden")]
pub mod kubewarden;
pub mod labels;
pub mod limits;
pub mod lists;
pub mod podspec;
pub mod policies;
pub mod policy;
pub mod pools;
pub mod quantity;
pub mod routing;
pub mod schedule;
pub mod scheduling;
pub mod selector;
pub mod settings;
#[cfg(test)]
mod testing;
pub mod vram;
pub mod workload;
