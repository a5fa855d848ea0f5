"""The host's floor: bench/host-floor, a module that accepts every request and every settings
document without reading either, run by kwctl_bench.py and policy_server_bench.py on each static
policy's requests with that policy's own settings.

What kwctl or policy-server spends on such a call (the request and the settings serialized into
the payload, the instance, the answer read back) is spent before any policy code runs. So a
policy cannot answer that request with those settings faster than the floor in that host, and
when the floor is already slower than Kubewarden's labels-policy (which runs with its own small
settings), no module can meet "at or below labels-policy" there.
"""

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CRATE = REPO / "bench" / "host-floor"
PACKAGE = "host-floor-policy"
BUILT = REPO / "target" / "wasm32-wasip1" / "release" / "host_floor_policy.wasm"
# The label its rows carry in both sections.
NAME = "host floor"


def row_name(policy):
    """What a floor row is called beside `policy`'s rows, in every section."""
    return f"{NAME} ({policy}'s settings)"


def build():
    """The floor module, built first (cargo: a no-op when up to date)."""
    cargo = shutil.which("cargo") or "cargo"
    subprocess.run([cargo, "build", "--locked", "--release", "--target", "wasm32-wasip1", "-p", PACKAGE],
                   cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return BUILT


def module(run_kwctl, out):
    """The floor module built and annotated into `out` (kwctl annotate through
    `run_kwctl(args)`). Returns `out`."""
    build()
    run_kwctl(["annotate", "-m", str(CRATE / "metadata.yml"), "-o", str(out), str(BUILT)])
    return out


def note(host):
    """One paragraph for the section: what the floor rows are."""
    return (f"*{NAME}* rows: `bench/host-floor`, a module that accepts without reading the request or "
            f"the settings, run by {host} on a static policy's own request with that policy's settings "
            "(the row names the policy). What the host spends on that call is spent before any policy "
            "code runs: no module answers that request with those settings faster in this host.")
