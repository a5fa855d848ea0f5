//! The host's floor: a Kubewarden policy that accepts every request and every settings
//! document without reading either.
//!
//! The benchmarks run it with each static policy's own settings and requests
//! (`bench/kubewarden/kwctl_bench.py`, `bench/kubewarden/policy_server_bench.py`): whatever
//! kwctl or policy-server spends on such a call (serializing the request and the settings into
//! the payload, instantiating a module, reading the answer) is spent before any policy runs, so
//! no module can answer that request with those settings faster in that host.
//!
//! `bench/kubewarden/host_cost.py` builds it with a fixed amount of work per call, set when it
//! is built (`HOST_FLOOR_WORK`, `HOST_FLOOR_PAGES`: see [`WORK`] and [`PAGES`]), to price
//! guest instructions and guest pages in policy-server. Built without them, it does nothing.

use kubewarden_policy_sdk::protocol_version_guest;
use kubewarden_policy_sdk::wapc_guest::prelude::*;

/// Steps of a chain of dependent multiply-adds per call (environment variable
/// `HOST_FLOOR_WORK` at build time; 0 without it).
pub const WORK: u64 = build_number(option_env!("HOST_FLOOR_WORK"));

/// 4 KiB pages of a zeroed static written per call, each one byte (environment variable
/// `HOST_FLOOR_PAGES` at build time; 0 without it). A fresh instance takes a page fault for
/// each.
pub const PAGES: usize = build_number(option_env!("HOST_FLOOR_PAGES")) as usize;

const PAGE_BYTES: usize = 4096;

static mut TOUCHED: [u8; PAGES * PAGE_BYTES] = [0; PAGES * PAGE_BYTES];

/// A decimal number given at build time; the build fails on anything else.
const fn build_number(text: Option<&str>) -> u64 {
    let Some(text) = text else { return 0 };
    let digits = text.as_bytes();
    let mut n: u64 = 0;
    let mut i = 0;
    while i < digits.len() {
        assert!(
            digits[i].is_ascii_digit(),
            "HOST_FLOOR_WORK and HOST_FLOOR_PAGES take a decimal number"
        );
        n = n * 10 + (digits[i] - b'0') as u64;
        i += 1;
    }
    n
}

/// The waPC entry point: registers the three functions Kubewarden calls.
#[unsafe(no_mangle)]
pub extern "C" fn wapc_init() {
    register_function("validate", validate);
    register_function("validate_settings", validate_settings);
    register_function("protocol_version", protocol_version_guest);
}

// Both ranges are empty in the floor itself, which then compiles to the bare answer.
#[allow(clippy::reversed_empty_ranges)]
fn validate(_payload: &[u8]) -> CallResult {
    let mut x: u64 = 1;
    for step in 0..WORK {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(step));
    }
    std::hint::black_box(x);
    let pages = (&raw mut TOUCHED).cast::<u8>();
    for page in 0..PAGES {
        // SAFETY: inside the static, and the module is single-threaded.
        unsafe { pages.add(page * PAGE_BYTES).write_volatile(1) };
    }
    Ok(br#"{"accepted":true}"#.to_vec())
}

fn validate_settings(_payload: &[u8]) -> CallResult {
    Ok(br#"{"valid":true}"#.to_vec())
}
