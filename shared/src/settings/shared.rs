//! The settings fields every policy has, declared and checked once, and pool references.

use super::FieldError;

/// Declares a policy's settings struct and its `Default`: the policy's own fields, each
/// with its default (`pub name: Type = default,`), and, where `@shared;` stands, the fields
/// every policy shares: `extraGpuResources`, `customKinds`, `exemptNamespaces`, then
/// `exceptions` and `maxExceptionDays` when written `@shared + exceptions;`, then `dra` and
/// `fractionalGpus`. It also gives the struct `gpu_resources()` (what counts as a GPU) and
/// `validate_shared()` (the checks of those fields; the policy's own `validate` calls it,
/// and checks `exceptions` against its rule names).
macro_rules! policy_settings {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : $ty:ty = $default:expr, )*
            @shared $( + $exceptions:ident )?;
            $( $(#[$gmeta:meta])* $gvis:vis $gfield:ident : $gty:ty = $gdefault:expr, )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$fmeta])* $fvis $field: $ty, )*
            /// More GPU resource names (exact, or a prefix ending in `*`).
            pub extra_gpu_resources: Vec<String>,
            /// Where custom resources keep their pod templates.
            pub custom_kinds: Vec<$crate::workload::CustomKind>,
            /// Namespaces the policy lets through (exact, or a prefix ending in `*`).
            pub exempt_namespaces: $crate::settings::NamespaceList,
            $(
                /// Exceptions with an owner and an end date ([`crate::exceptions`]).
                #[serde(skip_serializing_if = "Vec::is_empty")]
                pub $exceptions: Vec<$crate::exceptions::Exception>,
                /// The furthest ahead an exception may end, in days.
                pub max_exception_days: u32,
            )?
            /// Which Dynamic Resource Allocation device classes are GPUs.
            pub dra: $crate::dra::DraSettings,
            /// Which fractional-GPU schedulers (KAI, HAMi) are recognized.
            pub fractional_gpus: $crate::fractional::FractionalSettings,
            $( $(#[$gmeta])* $gvis $gfield: $gty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name {
                    $( $field: $default, )*
                    extra_gpu_resources: Vec::new(),
                    custom_kinds: Vec::new(),
                    exempt_namespaces: Default::default(),
                    $(
                        $exceptions: Vec::new(),
                        max_exception_days: $crate::exceptions::DEFAULT_MAX_DAYS,
                    )?
                    dra: Default::default(),
                    fractional_gpus: Default::default(),
                    $( $gfield: $gdefault, )*
                }
            }
        }

        impl $name {
            /// What counts as a GPU under these settings.
            pub fn gpu_resources(&self) -> $crate::gpu::GpuResources {
                $crate::gpu::GpuResources::new(&self.extra_gpu_resources)
                    .with_fractional(&self.fractional_gpus)
            }

            /// Checks the fields every policy shares (`exceptions` aside: their rule names
            /// are the policy's).
            fn validate_shared(&self) -> Result<(), String> {
                $crate::settings::validate_resource_names(
                    "extraGpuResources",
                    &self.extra_gpu_resources,
                )?;
                $crate::settings::validate_custom_kinds("customKinds", &self.custom_kinds)?;
                self.exempt_namespaces.validate("exemptNamespaces")?;
                self.dra.validate("dra")?;
                self.fractional_gpus.validate("fractionalGpus")
            }
        }
    };
}

pub(crate) use policy_settings;

/// A reference to a pool by name (`defaultPool`, `lendTo[].pool`, `alternatives[]`): an
/// error unless `name` is one of `pools`, the pools it may name.
pub fn check_pool_ref(field: &str, name: &str, pools: &[&str]) -> Result<(), FieldError> {
    if pools.contains(&name) {
        return Ok(());
    }
    let choices = if pools.is_empty() {
        "the other pools (there are none)".to_string()
    } else {
        pools.join(", ")
    };
    Err(FieldError::new(
        field,
        format!("'{name}' names no pool; use one of {choices}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_references_name_the_choices() {
        check_pool_ref("defaultPool", "a", &["a", "b"]).unwrap();
        assert_eq!(
            check_pool_ref("alternatives[0]", "c", &["a", "b"])
                .unwrap_err()
                .to_string(),
            "alternatives[0]: 'c' names no pool; use one of a, b"
        );
        assert_eq!(
            check_pool_ref("alternatives[0]", "c", &[])
                .unwrap_err()
                .reason,
            "'c' names no pool; use one of the other pools (there are none)"
        );
    }
}
