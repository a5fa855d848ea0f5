//! What the VRAM rule knows: GPU products and their memory, models and the memory they
//! need, and where models are registered.
//!
//! - [`products`]: GFD product names and MIG profiles -> MiB per device.
//! - [`model`]: a registry entry, checked, and the memory estimate.
//! - [`registry`]: finding a model in the settings or the registry ConfigMap.
//! - [`yaml`]: the registry ConfigMap's YAML (saphyr-parser events into JSON values, bounded).

pub mod model;
pub mod products;
pub mod registry;
pub mod yaml;

pub use model::{Dtype, Estimate, Model, ModelEntry, ModelSpec};
pub use products::{DeviceMemory, GpuCatalog};
pub use registry::{FoundModel, Registry, RegistryRef};
