#![no_main]
//! gpu-vram-fit-policy: model-server command lines (command, args, env; `sh -c` scripts;
//! known flags in both spellings, variables, bad values) through the server-argument reader
//! and the policy. `FUZZ_DUMP=<file>` writes the container's JSON.
use gpu_admission_fuzz::command_line::CommandLineInput;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: CommandLineInput| gpu_admission_fuzz::command_line(&input));
