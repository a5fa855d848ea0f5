//! The build script of every policy crate (each Cargo.toml names it with `build`).
//!
//! A policy module starts with 1.5 MiB of memory instead of the linker's 1.1 MiB (the 1 MiB
//! stack, the statics, a few KiB of heap): room for the request arena's first chunk (256 KiB,
//! `shared/src/arena.rs`) without growing memory. Policy-server runs every request on a
//! fresh instance, so growing memory, and the allocator's bookkeeping at the far end of the
//! grown part, happened on every request: a `memory.grow` and one page fault more each
//! time (BENCHMARKS.md). Pages never touched cost nothing. Only the module (the `cdylib`
//! built for wasm32) is linked with it; native builds and test binaries are not.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-cdylib=--initial-memory=1572864");
    }
    println!("cargo:rerun-if-changed=../build.rs");
}
