//! Comparing long byte strings in the policy modules, eight bytes at a time.
//!
//! In wasm32-wasip1 a comparison of slices that the compiler does not inline calls
//! wasi-libc's `memcmp`, musl's loop of one byte per iteration. The waPC glue compares every
//! payload's settings text (a kilobyte or more for routing and VRAM fit) with the text it
//! kept: measured with callgrind on the x86 code wasmtime compiles the modules to, that
//! comparison alone was 6% of VRAM fit's `validate` on a Deployment and 9% of routing's on a
//! Pod (BENCHMARKS.md, "What the figures say"). [`equal`] reads eight bytes per step.
//! The modules also replace `memcmp` itself ([`memcmp`]), which every other comparison of
//! slices and strings calls: map keys looked up and inserted while reading a request.

/// Whether `a` and `b` hold the same bytes.
pub fn equal(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (words_a, words_b) = (a.chunks_exact(8), b.chunks_exact(8));
    let (tail_a, tail_b) = (words_a.remainder(), words_b.remainder());
    words_a.zip(words_b).all(|(x, y)| word(x) == word(y))
        && tail_a.iter().zip(tail_b).all(|(x, y)| x == y)
}

/// `bytes`, eight of them, as one number.
pub(crate) fn word(bytes: &[u8]) -> u64 {
    let mut eight = [0; 8];
    eight.copy_from_slice(bytes);
    u64::from_ne_bytes(eight)
}

/// `text` without `suffix` at its end, when it ends with it (as `<[u8]>::strip_suffix`).
pub fn strip_suffix<'a>(text: &'a [u8], suffix: &[u8]) -> Option<&'a [u8]> {
    let at = text.len().checked_sub(suffix.len())?;
    let (rest, end) = text.split_at(at);
    equal(end, suffix).then_some(rest)
}

/// `memcmp` for the policy modules, replacing wasi-libc's (musl's one byte per step).
///
/// Rust compares slices and strings through `memcmp`, so every map key the rules look up and
/// every `BTreeMap` insertion while reading a request calls it. This one compares eight bytes
/// per step, then finds the first differing byte of the differing word.
///
/// Built on every target so that the tests compare it with the slices' own ordering; only the
/// policy modules export it under C's name. Never inlined: it is called from thousands of
/// places, and inlined into each it made the modules 3 to 7% larger.
///
/// # Safety
/// As C's `memcmp`: `a` and `b` point to at least `n` readable bytes.
#[cfg_attr(all(target_arch = "wasm32", feature = "kubewarden"), unsafe(no_mangle))]
#[inline(never)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n bytes are readable from both.
        let (x, y) = unsafe {
            (
                a.add(i).cast::<u64>().read_unaligned(),
                b.add(i).cast::<u64>().read_unaligned(),
            )
        };
        if x != y {
            // Little-endian: the lowest set bit of the difference is in the first differing byte.
            let at = ((x ^ y).trailing_zeros() / 8) as usize;
            // SAFETY: at < 8.
            let (p, q) = unsafe { (*a.add(i + at), *b.add(i + at)) };
            return i32::from(p) - i32::from(q);
        }
        i += 8;
    }
    while i < n {
        // SAFETY: i < n.
        let (p, q) = unsafe { (*a.add(i), *b.add(i)) };
        if p != q {
            return i32::from(p) - i32::from(q);
        }
        i += 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::{equal, memcmp, strip_suffix};

    #[test]
    fn memcmp_orders_as_slices_do() {
        let base: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37)).collect();
        for n in 0..40 {
            let a = &base[..n];
            // SAFETY: both hold n bytes.
            let same = unsafe { memcmp(a.as_ptr(), a.to_vec().as_ptr(), n) };
            assert_eq!(same, 0, "{n} bytes");
            for at in 0..n {
                for flip in [0x01, 0x80, 0xff] {
                    let mut b = a.to_vec();
                    b[at] ^= flip;
                    // SAFETY: both hold n bytes.
                    let got = unsafe { memcmp(a.as_ptr(), b.as_ptr(), n) };
                    assert_eq!(got.cmp(&0), a.cmp(&b[..]), "{n} bytes, {flip:#x} at {at}");
                    // SAFETY: both hold n bytes, one byte further on.
                    let shifted = unsafe { memcmp(base[1..].as_ptr(), b.as_ptr(), n) };
                    assert_eq!(
                        shifted.cmp(&0),
                        base[1..=n].cmp(&b[..]),
                        "{n} bytes at offset 1"
                    );
                }
            }
        }
    }

    #[test]
    fn equal_as_slices_are_for_every_length_and_difference() {
        let base: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37)).collect();
        for n in 0..40 {
            let a = &base[..n];
            let copy = a.to_vec();
            assert!(equal(a, &copy), "{n} bytes");
            // The same bytes at another alignment.
            let shifted = base[1..=n].to_vec();
            assert!(equal(&base[1..=n], &shifted), "{n} bytes");
            for at in 0..n {
                let mut b = a.to_vec();
                b[at] ^= 0x80;
                assert!(!equal(a, &b), "{n} bytes, differing at {at}");
            }
            assert!(!equal(a, &base[..n + 1]), "lengths {n} and {}", n + 1);
        }
    }

    #[test]
    fn strip_suffix_is_the_slices_own() {
        let text = br#"{"request":{},"settings":{"pools":[{"name":"batch"}]}}"#;
        for cut in 0..=text.len() {
            let suffix = &text[cut..];
            assert_eq!(
                strip_suffix(text, suffix),
                text.strip_suffix(suffix),
                "{cut}"
            );
            let mut other = suffix.to_vec();
            if let Some(first) = other.first_mut() {
                *first ^= 1;
                assert_eq!(strip_suffix(text, &other), None, "{cut}");
            }
        }
        assert_eq!(strip_suffix(b"ab", b"xab"), None);
    }
}
