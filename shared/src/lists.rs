//! Reading Kubernetes list answers (`{"items": [{...}, ...]}`) one item at a time with serde_json,
//! borrowing from the input: each item yields the raw values (`&RawValue`) found at a
//! few member paths (`["spec", "nodeName"]`), and everything else is skipped by serde's
//! `IgnoredAny`. No item, and no tree of the list, is ever held in memory.
//!
//! Kubewarden applies field masks to everything but `metadata`, so a masked Pod is mostly
//! metadata (name, labels, annotations, owner references...): skipping it is most of the
//! work. serde_json skips strings eight bytes at a time and validates what it skips; a
//! hand-written bracket matcher that does not validate was measured at most 1.6x faster
//! on a whole decision over masked pools (`gpu-bench`, 1,000 and 10,000 pods), about 1.1x
//! on unmasked ones, which does not pay for a second JSON parser. The whole list is
//! checked as JSON: malformed, unbalanced or truncated input is an error, never a partial
//! count.

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;

pub mod lean;

/// Why a list answer could not be read.
#[derive(Debug)]
pub enum ListError {
    Json(serde_json::Error),
    /// Well-formed, but a value is not what it must be.
    Invalid(String),
}

impl From<serde_json::Error> for ListError {
    fn from(e: serde_json::Error) -> Self {
        ListError::Json(e)
    }
}

impl fmt::Display for ListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListError::Json(e) => write!(f, "{e}"),
            ListError::Invalid(e) => f.write_str(e),
        }
    }
}

/// A raw value read by `seed` (the whole of it).
pub fn read_raw<'de, S: DeserializeSeed<'de>>(
    raw: &'de str,
    seed: S,
) -> Result<S::Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(raw);
    let value = seed.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// A field's raw value parsed as `T`; absent (or `null`) is `T::default()`.
pub fn parse_or_default<T: serde::de::DeserializeOwned + Default>(
    raw: Option<&str>,
) -> Result<T, serde_json::Error> {
    raw.map_or_else(|| Ok(T::default()), serde_json::from_str)
}

/// The text of a raw JSON string value without escapes (names of Kubernetes objects
/// never have any), borrowed.
pub fn raw_str(raw: &str) -> Option<&str> {
    raw.strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .filter(|inner| !inner.contains('\\'))
}

/// A raw JSON string value as a `String` ([`raw_str`], else decoded by serde_json).
pub fn json_string(raw: &str) -> Result<String, ListError> {
    match raw_str(raw) {
        Some(text) => Ok(text.to_string()),
        None => Ok(serde_json::from_str(raw)?),
    }
}

/// Calls `on_item` once per element of the top-level `items` array (`items` absent or
/// `null` is an empty list), with the raw value at each of `paths` (member names from
/// the item, in the order of `paths`): `None` where a member on the way is absent or
/// `null`. Every item, and every value a path goes through, must be an object (or `null`
/// for the latter). When a member repeats, the last one wins. Stops at the first error of
/// `on_item` and returns it. No path may be a prefix of another.
pub fn for_each_item<'a, E: From<serde_json::Error>, const N: usize>(
    bytes: &'a [u8],
    paths: [&[&str]; N],
    mut on_item: impl FnMut([Option<&'a RawValue>; N]) -> Result<(), E>,
) -> Result<(), E> {
    debug_assert!(N <= 64 && paths.iter().all(|p| !p.is_empty()));
    let mut stopped = None;
    let mut found = [None; N];
    let mut on_item = |found: &mut [Option<&'a RawValue>]| {
        let values = std::array::from_fn(|i| found[i].take());
        on_item(values).map_err(|e| stopped = Some(e)).is_ok()
    };
    let list = ListSeed {
        paths: &paths,
        found: &mut found,
        on_item: &mut on_item,
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let read = de.deserialize_map(list).and_then(|()| de.end());
    match (read, stopped) {
        (_, Some(e)) => Err(e),
        (Ok(()), None) => Ok(()),
        (Err(e), None) => Err(e.into()),
    }
}

/// Called after each item with the values found (to be taken); `false` stops the reading.
type OnItem<'p, 'a> = &'p mut dyn FnMut(&mut [Option<&'a RawValue>]) -> bool;

/// The list object: its `items` are read, every other member is skipped.
struct ListSeed<'p, 'a> {
    paths: &'p [&'p [&'p str]],
    found: &'p mut [Option<&'a RawValue>],
    on_item: OnItem<'p, 'a>,
}

impl<'de> Visitor<'de> for ListSeed<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let ListSeed {
            paths,
            found,
            on_item,
        } = self;
        let items = OnPaths {
            paths: &[&["items"]],
            depth: 0,
            live: 1,
        };
        while let Some(key) = map.next_key_seed(items)? {
            if key != 0 {
                map.next_value_seed(OrNull(Items {
                    paths,
                    found: &mut *found,
                    on_item: &mut *on_item,
                }))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// `null`, or what the seed reads.
struct OrNull<S>(S);

impl<'de, S: DeserializeSeed<'de, Value = ()>> DeserializeSeed<'de> for OrNull<S> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de, Value = ()>> Visitor<'de> for OrNull<S> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("null or a value")
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.0.deserialize(d)
    }
}

/// The `items` array, one item at a time.
struct Items<'p, 'a> {
    paths: &'p [&'p [&'p str]],
    found: &'p mut [Option<&'a RawValue>],
    on_item: OnItem<'p, 'a>,
}

impl<'de> DeserializeSeed<'de> for Items<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of items")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let all = u64::MAX >> (64 - self.paths.len().max(1));
        loop {
            let item = Walk {
                paths: self.paths,
                depth: 0,
                live: all,
                found: &mut *self.found,
            };
            if seq.next_element_seed(item)?.is_none() {
                return Ok(());
            }
            if !(self.on_item)(self.found) {
                return Err(de::Error::custom("stopped"));
            }
        }
    }
}

/// An object at `depth` of the paths in `live` (a bit per path): members on a path are
/// walked into, or kept raw where their path ends; the others are skipped.
struct Walk<'p, 'a> {
    paths: &'p [&'p [&'p str]],
    depth: usize,
    live: u64,
    found: &'p mut [Option<&'a RawValue>],
}

impl<'de> DeserializeSeed<'de> for Walk<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let key = OnPaths {
            paths: self.paths,
            depth: self.depth,
            live: self.live,
        };
        while let Some(on) = map.next_key_seed(key)? {
            if on == 0 {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let ends = key.ending(on);
            if ends != 0 {
                let raw: &'de RawValue = map.next_value()?;
                let kept = (raw.get() != "null").then_some(raw);
                key.set(self.found, ends, kept);
            } else {
                // A repeated member replaces what an earlier one gave.
                key.set(self.found, on, None);
                map.next_value_seed(OrNull(Walk {
                    paths: self.paths,
                    depth: self.depth + 1,
                    live: on,
                    found: &mut *self.found,
                }))?;
            }
        }
        Ok(())
    }
}

/// A member name, read as the set of `live` paths whose name at `depth` it is (no
/// allocation: borrowed or transient text is compared in place).
#[derive(Clone, Copy)]
struct OnPaths<'p> {
    paths: &'p [&'p [&'p str]],
    depth: usize,
    live: u64,
}

impl OnPaths<'_> {
    /// The paths of `set` that end at this depth.
    fn ending(&self, set: u64) -> u64 {
        self.select(|i, path| set & 1 << i != 0 && path.len() == self.depth + 1)
    }

    fn select(&self, keep: impl Fn(usize, &[&str]) -> bool) -> u64 {
        self.paths
            .iter()
            .enumerate()
            .filter(|(i, path)| keep(*i, path))
            .fold(0, |m, (i, _)| m | 1 << i)
    }

    /// Sets the values of the paths of `set` (found deeper: `None` clears them).
    fn set<'a>(&self, found: &mut [Option<&'a RawValue>], set: u64, value: Option<&'a RawValue>) {
        for (i, found) in found.iter_mut().enumerate() {
            if set & 1 << i != 0 {
                *found = value;
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for OnPaths<'_> {
    type Value = u64;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for OnPaths<'_> {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E>(self, name: &str) -> Result<u64, E> {
        Ok(self.select(|i, path| self.live & 1 << i != 0 && path[self.depth] == name))
    }
}

#[cfg(test)]
mod tests;
