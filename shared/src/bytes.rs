//! Comparing long byte strings in the policy modules, eight bytes at a time.
//!
//! In wasm32-wasip1 a comparison of slices that the compiler does not inline calls
//! wasi-libc's `memcmp`, musl's loop of one byte per iteration. The waPC glue compares every
//! payload's settings text (a kilobyte or more for routing and VRAM fit) with the text it
//! kept: measured with callgrind on the x86 code wasmtime compiles the modules to, that
//! comparison alone was 6% of VRAM fit's `validate` on a Deployment and 9% of routing's on a
//! Pod (BENCHMARKS.md, "What the figures say"). [`equal`] reads eight bytes per step.
//! Short strings (map keys, field names) gain little, so the rest of the code compares as
//! usual.

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
fn word(bytes: &[u8]) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::{equal, strip_suffix};

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
