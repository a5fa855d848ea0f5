//! The settings fields every policy has, declared and checked once, and pool references.

use super::FieldError;

/// Declares a policy's settings struct and its `Default`: the policy's own fields, each
/// with its default (`pub name: Type = default,`), and, where `@shared;` stands, the fields
/// every policy shares: `extraGpuResources`, `customKinds`, `exemptNamespaces`, then
/// `exceptions` and `maxExceptionDays` when written `@shared + exceptions;`, then `dra` and
/// `fractionalGpus`. A policy with pools starts with `@pools(PoolType);`: `poolLabelKey`
/// (default [`super::DEFAULT_POOL_LABEL_KEY`]) and `pools`. Every settings struct rejects
/// unknown fields (so that a typo cannot silently turn a rule off), spells them in
/// camelCase and defaults the fields left out.
///
/// It also gives the struct `gpu_resources()` (what counts as a GPU),
/// `validate_shared()` (the checks of the shared fields; the policy's own `validate` calls
/// it, and checks `exceptions` against its rule names), [`super::Common`] and, with
/// `exceptions`, [`crate::exceptions::HasExceptions`].
macro_rules! policy_settings {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( @pools($pool:ty); )?
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : $ty:ty = $default:expr, )*
            @shared $( + $exceptions:ident )?;
            $( $(#[$gmeta:meta])* $gvis:vis $gfield:ident : $gty:ty = $gdefault:expr, )*
        }
    ) => {
        $(#[$meta])*
        #[serde(deny_unknown_fields, rename_all = "camelCase", default)]
        pub struct $name {
            $(
                /// The pod template label that names a workload's pool (routing sets it,
                /// the other policies read it; the pool's Pods are listed by it).
                pub pool_label_key: String,
                /// The pools, each with its `name` (the value of the pool label).
                pub pools: Vec<$pool>,
            )?
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
                    $(
                        pool_label_key: $crate::settings::DEFAULT_POOL_LABEL_KEY.to_string(),
                        pools: Vec::<$pool>::new(),
                    )?
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

        $crate::settings::policy_settings!(@common $name $(, $exceptions)?);

        impl $name {
            /// What counts as a GPU under these settings.
            pub fn gpu_resources(&self) -> $crate::gpu::GpuResources<'_> {
                $crate::gpu::GpuResources::of(&self.extra_gpu_resources, &self.fractional_gpus)
            }

            /// Checks the fields every policy shares (`exceptions` aside: their rule names
            /// are the policy's).
            pub(crate) fn validate_shared(&self) -> Result<(), $crate::settings::FieldError> {
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
    (@common $name:ident) => {
        impl $crate::settings::Common for $name {
            fn exempt_namespaces(&self) -> &$crate::settings::NamespaceList {
                &self.exempt_namespaces
            }
        }
    };
    (@common $name:ident, $exceptions:ident) => {
        impl $crate::settings::Common for $name {
            fn exempt_namespaces(&self) -> &$crate::settings::NamespaceList {
                &self.exempt_namespaces
            }
            fn exceptions(&self) -> Option<&dyn $crate::exceptions::HasExceptions> {
                Some(self)
            }
        }

        impl $crate::exceptions::HasExceptions for $name {
            fn exceptions(&self) -> &[$crate::exceptions::Exception] {
                &self.$exceptions
            }
            fn max_exception_days(&self) -> u32 {
                self.max_exception_days
            }
            fn custom_kinds(&self) -> &[$crate::workload::CustomKind] {
                &self.custom_kinds
            }
        }
    };
}

pub(crate) use policy_settings;

/// The name of pool `field` (`pools[i]`), `name`, is not that of one of the `earlier` pools:
/// pool names are unique.
pub fn check_unique_pool_name<'a>(
    field: &str,
    name: &str,
    earlier: impl IntoIterator<Item = &'a str>,
) -> Result<(), FieldError> {
    match earlier.into_iter().position(|other| other == name) {
        Some(j) => Err(FieldError::new(
            format!("{field}.name"),
            format!("'{name}' is already the name of pools[{j}]; pool names must be unique"),
        )),
        None => Ok(()),
    }
}

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

/// A reference to a schedule by name (`window`): an error unless `valid` (it names a
/// schedule that checked out), naming the schedules `defined`.
pub fn check_window_ref(
    field: &str,
    window: &str,
    valid: bool,
    defined: &[&str],
) -> Result<(), FieldError> {
    if valid {
        return Ok(());
    }
    let defined = if defined.is_empty() {
        String::new()
    } else {
        format!(" (defined: {})", defined.join(", "))
    };
    Err(FieldError::new(
        field,
        format!("'{window}' names no schedule; define it under schedules{defined}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_references_name_the_schedules() {
        check_window_ref("w", "peak", true, &[]).unwrap();
        assert_eq!(
            check_window_ref("pools[0].thresholds[0].window", "night", false, &["peak"])
                .unwrap_err()
                .to_string(),
            "pools[0].thresholds[0].window: 'night' names no schedule; define it under schedules (defined: peak)"
        );
        assert_eq!(
            check_window_ref("w", "night", false, &[])
                .unwrap_err()
                .reason,
            "'night' names no schedule; define it under schedules"
        );
    }

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
