#![no_main]
//! The quantity parser on arbitrary text: never panics; accepted values are bounded and
//! display in a form that parses back to the same value.
use gpu_rules::quantity::Quantity;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(q) = Quantity::parse(text) {
            assert!(q.nanos().unsigned_abs() <= (i64::MAX as u128) * 1_000_000_000);
            assert_eq!(Quantity::parse(&q.to_string()), Ok(q), "display round trip of {text:?}");
        }
        let _ = Quantity::parse_count(text);
    }
});
