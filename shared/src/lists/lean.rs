//! Streaming readers for masked Pod and Node fields: GPU entries only, keys borrowed
//! while reading (a Node's `status.allocatable`, a pod's containers and `resources`).

use crate::gpu::GpuResources;
use crate::podspec::{Container, QuantityText, ResourceList, Resources, ScalarText};
use serde::de::{
    DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, SeqAccess, Unexpected, Visitor,
};
use std::borrow::Cow;
use std::fmt;

/// A map key, borrowed from the input when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// The members of one kind of object that are read; the others are skipped.
pub trait Members {
    type Value: Default;
    /// What the object is, for errors.
    const WHAT: &'static str;
    /// Whether `null` reads as the default value (else it is an error).
    const NULLABLE: bool = true;
    /// Reads the value of member `key` into `out` if it is one that counts; `false`
    /// leaves the value to be skipped.
    fn member<'de, A: MapAccess<'de>>(
        &self,
        out: &mut Self::Value,
        key: &str,
        map: &mut A,
    ) -> Result<bool, A::Error>;
}

/// Reads an object (or `null`) as `M` says.
pub struct Object<M>(pub M);

impl<'de, M: Members> DeserializeSeed<'de> for Object<M> {
    type Value = M::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<M::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, M: Members> Visitor<'de> for Object<M> {
    type Value = M::Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(M::WHAT)
    }
    fn visit_unit<E: Error>(self) -> Result<M::Value, E> {
        if M::NULLABLE {
            Ok(M::Value::default())
        } else {
            Err(E::invalid_type(Unexpected::Unit, &self))
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<M::Value, A::Error> {
        let mut out = M::Value::default();
        while let Some(Key(key)) = map.next_key()? {
            if !self.0.member(&mut out, &key, &mut map)? {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(out)
    }
}

/// `limits` / `requests` (and a Node's `allocatable`): GPU entries only.
pub struct GpuList<'n>(pub &'n GpuResources<'n>);

impl Members for GpuList<'_> {
    type Value = ResourceList;
    const WHAT: &'static str = "a map of resource quantities";
    fn member<'de, A: MapAccess<'de>>(
        &self,
        out: &mut ResourceList,
        key: &str,
        map: &mut A,
    ) -> Result<bool, A::Error> {
        if !self.0.is_gpu(key) {
            return Ok(false);
        }
        let q = map.next_value_seed(ScalarText::quantity("a quantity (string or number)"))?;
        out.insert(key.to_string(), QuantityText(q));
        Ok(true)
    }
}

/// `resources`: its `limits` and `requests`.
pub struct ResourcesOf<'n>(pub &'n GpuResources<'n>);

impl Members for ResourcesOf<'_> {
    type Value = Resources;
    const WHAT: &'static str = "resources (limits, requests)";
    fn member<'de, A: MapAccess<'de>>(
        &self,
        out: &mut Resources,
        key: &str,
        map: &mut A,
    ) -> Result<bool, A::Error> {
        let list = match key {
            "limits" => &mut out.limits,
            "requests" => &mut out.requests,
            _ => return Ok(false),
        };
        *list = map.next_value_seed(Object(GpuList(self.0)))?;
        Ok(true)
    }
}

/// A container: its `resources` and `restartPolicy`.
struct ContainerOf<'n>(&'n GpuResources<'n>);

impl Members for ContainerOf<'_> {
    type Value = Container;
    const WHAT: &'static str = "a container";
    const NULLABLE: bool = false;
    fn member<'de, A: MapAccess<'de>>(
        &self,
        out: &mut Container,
        key: &str,
        map: &mut A,
    ) -> Result<bool, A::Error> {
        match key {
            "resources" => out.resources = map.next_value_seed(Object(ResourcesOf(self.0)))?,
            "restartPolicy" => out.restart_policy = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// `containers`, `initContainers`, `ephemeralContainers` (`null` is none).
pub struct Containers<'n>(pub &'n GpuResources<'n>);

impl<'de> DeserializeSeed<'de> for Containers<'_> {
    type Value = Vec<Container>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Container>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Containers<'_> {
    type Value = Vec<Container>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of containers")
    }
    fn visit_unit<E>(self) -> Result<Vec<Container>, E> {
        Ok(Vec::new())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Container>, A::Error> {
        let mut out = Vec::new();
        while let Some(c) = seq.next_element_seed(Object(ContainerOf(self.0)))? {
            out.push(c);
        }
        Ok(out)
    }
}

/// `metadata.labels`: the values of the labels named (by their index in the slice), the
/// others skipped.
pub struct Labels<'k>(pub &'k [&'k str]);

impl Members for Labels<'_> {
    type Value = Vec<(usize, String)>;
    const WHAT: &'static str = "a map of labels";
    fn member<'de, A: MapAccess<'de>>(
        &self,
        out: &mut Vec<(usize, String)>,
        key: &str,
        map: &mut A,
    ) -> Result<bool, A::Error> {
        let Some(i) = self.0.iter().position(|k| !k.is_empty() && *k == key) else {
            return Ok(false);
        };
        let value: String = map.next_value()?;
        out.push((i, value));
        Ok(true)
    }
}
