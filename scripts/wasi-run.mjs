#!/usr/bin/env -S node --no-warnings
// Cargo runner for wasm32-wasip1 test binaries: runs the module under Node's built-in
// WASI (preview1), passing cargo's arguments through, so `cargo test --target
// wasm32-wasip1` runs the rules crate's own tests inside a wasm runtime.
import { readFile } from "node:fs/promises";
import { WASI } from "node:wasi";
import process from "node:process";

const [, , wasmPath, ...args] = process.argv;
const wasi = new WASI({ version: "preview1", args: [wasmPath, ...args], env: {}, returnOnExit: true });
const module = await WebAssembly.compile(await readFile(wasmPath));
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
let code;
try {
  code = wasi.start(instance);
} catch (e) {
  // A panic aborts the module (wasm has no unwinding): report it as a failure.
  console.error(`wasm test binary trapped: ${e}`);
  code = 101;
}
process.exit(code ?? 0);
