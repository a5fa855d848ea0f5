"""The host's floor: bench/host-floor, a module that accepts every request and every settings
document without reading either, run by kwctl_bench.py and policy_server_bench.py on each static
policy's requests with that policy's own settings.

What kwctl or policy-server spends on such a call (the request and the settings serialized into
the payload, the instance, the answer read back) is spent before any policy code runs. So a
policy cannot answer that request with those settings faster than the floor in that host, and
when the floor is already slower than Kubewarden's labels-policy (which runs with its own small
settings), no module can meet "at or below labels-policy" there.
"""

import os
import shutil
import subprocess
from pathlib import Path

from cargo_target import target_dir

REPO = Path(__file__).resolve().parents[2]
CRATE = REPO / "bench" / "host-floor"
PACKAGE = "host-floor-policy"
BUILT = target_dir() / "wasm32-wasip1" / "release" / "host_floor_policy.wasm"
# Where the variants with work per call are built (host_cost.py): never over the floor itself.
VARIANTS = target_dir() / "host-floor-variants"
# The label its rows carry in both sections.
NAME = "host floor"


def row_name(policy):
    """What a floor row is called beside `policy`'s rows, in every section."""
    return f"{NAME} ({policy}'s settings)"


def build(work=0, pages=0):
    """The floor module, built first (cargo: a no-op when up to date). With `work` or `pages`, the
    floor doing that much per call (bench/host-floor's HOST_FLOOR_WORK and HOST_FLOOR_PAGES), built
    in its own target directory and copied out under a name that says what it does."""
    cargo = shutil.which("cargo") or "cargo"
    argv = [cargo, "build", "--locked", "--release", "--target", "wasm32-wasip1", "-p", PACKAGE]
    if not (work or pages):
        # The floor itself does nothing, whatever the caller's environment says.
        env = {k: v for k, v in os.environ.items() if k not in ("HOST_FLOOR_WORK", "HOST_FLOOR_PAGES")}
        subprocess.run(argv, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return BUILT
    env = dict(os.environ, CARGO_TARGET_DIR=str(VARIANTS), HOST_FLOOR_WORK=str(work), HOST_FLOOR_PAGES=str(pages))
    subprocess.run(argv, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    out = VARIANTS / f"host_floor_work{work}_pages{pages}.wasm"
    shutil.copyfile(VARIANTS / "wasm32-wasip1" / "release" / BUILT.name, out)
    return out


def module(run_kwctl, out, work=0, pages=0):
    """The floor module (with `work` and `pages`: see build) built and annotated into `out` (kwctl
    annotate through `run_kwctl(args)`). Returns `out`."""
    built = build(work, pages)
    run_kwctl(["annotate", "-m", str(CRATE / "metadata.yml"), "-o", str(out), str(built)])
    return out


def note(host):
    """One paragraph for the section: what the floor rows are."""
    return (f"*{NAME}* rows: `bench/host-floor`, a module that accepts without reading the request or "
            f"the settings, run by {host} on a static policy's own request with that policy's settings "
            "(the row names the policy). What the host spends on that call is spent before any policy "
            "code runs: no module answers that request with those settings faster in this host.")
