//! A minimal JSON scanner for list responses: finds the raw bytes of chosen top-level
//! fields of each item (`spec`, `status`) in `{"items": [{..., "spec": {...}, ...}, ...]}`
//! without parsing anything else.
//!
//! Kubewarden applies field masks to everything but `metadata`, so a masked Pod is
//! mostly metadata (name, labels, annotations, owner references...). Parsing it with
//! serde only to throw it away costs more than everything else the policy does; here
//! other values are skipped by matching brackets outside strings, which is a tight byte
//! loop (strings, most of the bytes of metadata, are skipped eight bytes at a time). The
//! chosen fields are then parsed (and validated) by serde_json. The framing itself is
//! checked: unbalanced or truncated input is an error, never a partial count.
//!
//! Keys are compared as raw bytes: a key spelled with escapes (`"sp\u0065c"`) is not
//! recognised. Kubernetes and Kubewarden never escape these keys.

use std::fmt;

/// Why a list could not be scanned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanError {
    pub offset: usize,
    pub expected: &'static str,
}

impl fmt::Display for ScanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expected {} at byte {}", self.expected, self.offset)
    }
}

impl std::error::Error for ScanError {}

/// Calls `on_item` once per element of the top-level `items` array, with the raw bytes
/// of the element's `spec` value (`None` when it has none). `items` absent or `null` is
/// an empty list. Stops at the first error of `on_item`.
pub fn for_each_item_spec<'a, E: From<ScanError>>(
    bytes: &'a [u8],
    mut on_item: impl FnMut(Option<&'a [u8]>) -> Result<(), E>,
) -> Result<(), E> {
    for_each_item(bytes, [b"spec"], |[spec]| on_item(spec))
}

/// Calls `on_item` once per element of the top-level `items` array, with the raw bytes
/// of the element's values for `keys` (in the order of `keys`; `None` where absent; the
/// last one wins if a key repeats). `items` absent or `null` is an empty list. Stops at
/// the first error of `on_item`.
pub fn for_each_item<'a, E: From<ScanError>, const N: usize>(
    bytes: &'a [u8],
    keys: [&[u8]; N],
    mut on_item: impl FnMut([Option<&'a [u8]>; N]) -> Result<(), E>,
) -> Result<(), E> {
    for_each_item_split(bytes, keys, None, |found, _| on_item(found))
}

/// [`for_each_item`], also splitting the value of `keys[split.0]` around its top-level
/// member `split.1` as [`split_member`] does, in the same pass (the value's members are
/// walked instead of skipped: no byte is read twice). `on_item` gets the split when the
/// item has that key.
pub fn for_each_item_split<'a, E: From<ScanError>, const N: usize>(
    bytes: &'a [u8],
    keys: [&[u8]; N],
    split: Option<(usize, &[u8])>,
    mut on_item: impl FnMut([Option<&'a [u8]>; N], Option<Split<'a>>) -> Result<(), E>,
) -> Result<(), E> {
    let mut s = Scanner { b: bytes, i: 0 };
    s.ws();
    s.expect(b'{', "'{' opening the list")?;
    s.ws();
    if !s.eat(b'}') {
        loop {
            s.ws();
            let key = s.string()?;
            s.ws();
            s.expect(b':', "':' after a key")?;
            s.ws();
            if key == b"items" {
                s.items(&keys, split, &mut on_item)?;
            } else {
                s.skip_value()?;
            }
            s.ws();
            if s.eat(b'}') {
                break;
            }
            s.expect(b',', "',' or '}' in the list object")?;
        }
    }
    s.ws();
    if s.i != s.b.len() {
        return Err(s.error("the end of the input").into());
    }
    Ok(())
}

/// An object's bytes split around one of its top-level members: what comes before the
/// member's key, the member's value, and what comes after the value. Two objects that
/// differ only in that member's value have the same `before` and `after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split<'a> {
    pub before: &'a [u8],
    /// The member's raw value; `None` when the object has no such member (then `before`
    /// is the whole value and `after` is empty).
    pub value: Option<&'a [u8]>,
    pub after: &'a [u8],
}

/// Splits `value` (the raw bytes of one JSON value, as [`for_each_item`] gives them)
/// around its top-level member `key`, walking the object's members once. A value that
/// is not an object has no members. The last member wins if `key` repeats.
pub fn split_member<'a>(value: &'a [u8], key: &[u8]) -> Result<Split<'a>, ScanError> {
    let mut s = Scanner { b: value, i: 0 };
    s.ws();
    let split = s.split_value(key)?;
    s.ws();
    if s.i != s.b.len() {
        return Err(s.error("the end of the value"));
    }
    Ok(split)
}

/// The raw value of the top-level member `key` of `value` (see [`split_member`]).
pub fn member<'a>(value: &'a [u8], key: &[u8]) -> Result<Option<&'a [u8]>, ScanError> {
    split_member(value, key).map(|s| s.value)
}

/// A mask with the high bit set in (at least) the lowest byte of `word` that is a quote
/// or a backslash, zero when there is none. The classic zero-byte test on
/// `word ^ byte * 0x0101...`: it can flag bytes *above* a true match (borrows), never
/// below one, so the lowest flagged byte is exact.
fn quote_or_backslash(word: u64) -> u64 {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    let zero_bytes = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    zero_bytes(word ^ (ONES * u64::from(b'"'))) | zero_bytes(word ^ (ONES * u64::from(b'\\')))
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    fn error(&self, expected: &'static str) -> ScanError {
        ScanError {
            offset: self.i,
            expected,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8, what: &'static str) -> Result<(), ScanError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(what))
        }
    }

    /// A string; returns its raw contents (escapes not decoded).
    fn string(&mut self) -> Result<&'a [u8], ScanError> {
        self.expect(b'"', "a string")?;
        let start = self.i;
        self.skip_string_body()?;
        Ok(self.b.get(start..self.i - 1).unwrap_or_default())
    }

    /// After an opening quote: up to and including the closing quote, jumping eight
    /// bytes at a time to the next quote or backslash.
    fn skip_string_body(&mut self) -> Result<(), ScanError> {
        loop {
            while let Some(chunk) = self.b.get(self.i..).and_then(|r| r.first_chunk::<8>()) {
                let found = quote_or_backslash(u64::from_le_bytes(*chunk));
                if found != 0 {
                    self.i += found.trailing_zeros() as usize / 8;
                    break;
                }
                self.i += 8;
            }
            let Some(c) = self.peek() else {
                return Err(self.error("a closing '\"'"));
            };
            self.i += 1;
            match c {
                b'"' => return Ok(()),
                b'\\' => self.i += 1,
                _ => {}
            }
        }
    }

    /// Any value, split around its top-level member `key` when it is an object (its
    /// members walked one by one; otherwise skipped as by [`Scanner::skip_value`]).
    fn split_value(&mut self, key: &[u8]) -> Result<Split<'a>, ScanError> {
        let start = self.i;
        if self.peek() != Some(b'{') {
            self.skip_value()?;
            return Ok(Split {
                before: self.b.get(start..self.i).unwrap_or_default(),
                value: None,
                after: &[],
            });
        }
        self.i += 1;
        let mut found = None;
        self.ws();
        if !self.eat(b'}') {
            loop {
                self.ws();
                let member = self.i;
                let k = self.string()?;
                self.ws();
                self.expect(b':', "':' after a key")?;
                self.ws();
                let value = self.i;
                self.skip_value()?;
                if k == key {
                    found = Some((member, value, self.i));
                }
                self.ws();
                if self.eat(b'}') {
                    break;
                }
                self.expect(b',', "',' or '}' in an object")?;
            }
        }
        let end = self.i;
        Ok(match found {
            Some((member, value, value_end)) => Split {
                before: self.b.get(start..member).unwrap_or_default(),
                value: self.b.get(value..value_end),
                after: self.b.get(value_end..end).unwrap_or_default(),
            },
            None => Split {
                before: self.b.get(start..end).unwrap_or_default(),
                value: None,
                after: &[],
            },
        })
    }

    /// Any value: strings and scalars directly, objects and arrays by matching brackets
    /// outside strings (content is validated where it matters: by serde, in `spec`).
    fn skip_value(&mut self) -> Result<(), ScanError> {
        match self.peek() {
            Some(b'"') => {
                self.i += 1;
                self.skip_string_body()
            }
            Some(b'{' | b'[') => {
                let mut depth = 0usize;
                while let Some(c) = self.peek() {
                    self.i += 1;
                    match c {
                        b'"' => self.skip_string_body()?,
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                return Ok(());
                            }
                        }
                        _ => {}
                    }
                }
                Err(self.error("a closing bracket"))
            }
            Some(c) if c == b'-' || c.is_ascii_alphanumeric() || c == b'.' || c == b'+' => {
                while let Some(c) = self.peek() {
                    if c == b'-' || c.is_ascii_alphanumeric() || c == b'.' || c == b'+' {
                        self.i += 1;
                    } else {
                        break;
                    }
                }
                Ok(())
            }
            _ => Err(self.error("a value")),
        }
    }

    fn items<E: From<ScanError>, const N: usize>(
        &mut self,
        keys: &[&[u8]; N],
        split: Option<(usize, &[u8])>,
        on_item: &mut impl FnMut([Option<&'a [u8]>; N], Option<Split<'a>>) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.b.get(self.i..self.i + 4) == Some(b"null") {
            self.i += 4;
            return Ok(());
        }
        self.expect(b'[', "'[' opening items")?;
        self.ws();
        if self.eat(b']') {
            return Ok(());
        }
        loop {
            self.ws();
            self.expect(b'{', "'{' opening an item")?;
            let mut found = [None; N];
            let mut split_found = None;
            self.ws();
            if !self.eat(b'}') {
                loop {
                    self.ws();
                    let key = self.string()?;
                    self.ws();
                    self.expect(b':', "':' after a key")?;
                    self.ws();
                    let start = self.i;
                    let k = keys.iter().position(|k| *k == key);
                    match split {
                        Some((index, member)) if k == Some(index) => {
                            split_found = Some(self.split_value(member)?);
                        }
                        _ => self.skip_value()?,
                    }
                    if let Some(k) = k {
                        found[k] = self.b.get(start..self.i);
                    }
                    self.ws();
                    if self.eat(b'}') {
                        break;
                    }
                    self.expect(b',', "',' or '}' in an item")?;
                }
            }
            on_item(found, split_found)?;
            self.ws();
            if self.eat(b']') {
                return Ok(());
            }
            self.expect(b',', "',' or ']' in items")?;
        }
    }
}

#[cfg(test)]
mod tests;
