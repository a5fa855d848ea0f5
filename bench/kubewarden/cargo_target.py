"""Cargo's target directory as cargo resolves it ($CARGO_TARGET_DIR, build.target-dir in a cargo
config, else target/ at the workspace root), where the benchmarks find what `make` built."""

import functools
import json
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def target_dir():
    """`cargo metadata`'s target_directory, or REPO/target when cargo cannot say."""
    cargo = shutil.which("cargo") or "cargo"
    try:
        out = subprocess.run([cargo, "metadata", "--format-version", "1", "--no-deps"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout
        return Path(json.loads(out)["target_directory"])
    except (OSError, subprocess.CalledProcessError, ValueError, KeyError):
        return REPO / "target"


if __name__ == "__main__":
    print(target_dir())
