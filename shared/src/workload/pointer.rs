//! JSON Pointers (RFC 6901) and the dot paths of settings: reading without allocating,
//! writing a template back in place.

use super::WorkloadError;
use super::extract::PodTemplate;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// The PodSpec of `template` in `object`, for changing it in place.
pub fn spec_mut<'a>(
    object: &'a mut Value,
    template: &PodTemplate,
) -> Result<&'a mut Map<String, Value>, WorkloadError> {
    object_at_mut(object, &template.spec_pointer).ok_or_else(|| WorkloadError::Malformed {
        location: template.location.clone(),
        reason: "is not an object".into(),
    })
}

/// The pod metadata of `template` in `object`, created (with any missing parents) if absent.
pub fn metadata_mut<'a>(
    object: &'a mut Value,
    template: &PodTemplate,
) -> Result<&'a mut Map<String, Value>, WorkloadError> {
    object_at_mut(object, &template.metadata_pointer).ok_or_else(|| WorkloadError::Malformed {
        location: pointer_to_location(&template.metadata_pointer),
        reason: "is not an object".into(),
    })
}

/// The value at JSON Pointer `pointer` (RFC 6901), as `Value::pointer` finds it, without
/// allocating: serde_json unescapes every token into a new `String`, and workload
/// extraction resolves dozens of pointers per request.
pub fn value_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.is_empty() {
        return Some(value);
    }
    pointer
        .strip_prefix('/')?
        .split('/')
        .try_fold(value, |target, token| {
            let token = unescape_token(token);
            match target {
                Value::Object(map) => map.get(token.as_ref()),
                Value::Array(items) => array_index(&token).and_then(|i| items.get(i)),
                _ => None,
            }
        })
}

/// [`value_at`] as a method: `object.at("/metadata/name")`, for `Value::pointer`.
pub trait At {
    fn at(&self, pointer: &str) -> Option<&Value>;
}

impl At for Value {
    fn at(&self, pointer: &str) -> Option<&Value> {
        value_at(self, pointer)
    }
}

/// A pointer token with `~1` and `~0` decoded (borrowed when it has none).
pub(super) fn unescape_token(token: &str) -> Cow<'_, str> {
    if token.contains('~') {
        Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
    } else {
        Cow::Borrowed(token)
    }
}

/// An array index token: digits without a sign or leading zeros (as serde_json reads them).
pub(super) fn array_index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() > 1) {
        return None;
    }
    token.parse().ok()
}

/// The object at `pointer`, creating missing (or null) members as empty objects.
/// `None` when something on the way is not an object (or an array index out of range).
pub fn object_at_mut<'a>(root: &'a mut Value, pointer: &str) -> Option<&'a mut Map<String, Value>> {
    let mut current = root;
    for token in pointer.split('/').skip(1) {
        let token = unescape_token(token);
        current = match current {
            Value::Object(map) => {
                // Looked up by reference first: a new key is allocated only when inserted.
                if map.get(token.as_ref()).is_none_or(Value::is_null) {
                    map.insert(token.to_string(), Value::Object(Map::new()));
                }
                map.get_mut(token.as_ref())?
            }
            Value::Array(items) => items.get_mut(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    current.as_object_mut()
}

/// `spec.template` -> `/spec/template`.
pub fn dot_to_pointer(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 1);
    push_dot_pointer(&mut out, path);
    out
}

/// Appends [`dot_to_pointer`] of `path` to `out`.
pub fn push_dot_pointer(out: &mut String, path: &str) {
    for segment in path.split('.') {
        out.push('/');
        push_escaped(out, segment);
    }
}

/// Appends `s` to `out` as a pointer token (`~` as `~0`, `/` as `~1`).
fn push_escaped(out: &mut String, s: &str) {
    if !s.contains(['~', '/']) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

/// `/spec/workerGroupSpecs/1/template/spec` -> `spec.workerGroupSpecs[1].template.spec`.
pub fn pointer_to_location(pointer: &str) -> String {
    let mut out = String::with_capacity(pointer.len() + 8);
    for token in pointer.split('/').skip(1) {
        let token = unescape_token(token);
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
            out.push('[');
            out.push_str(&token);
            out.push(']');
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&token);
        }
    }
    if out.is_empty() {
        "(object)".into()
    } else {
        out
    }
}
