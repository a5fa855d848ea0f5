"""What the benchmark reports say about the machine they ran on (kwctl_bench.py,
policy_server_bench.py)."""

from pathlib import Path


def cpu_model():
    """The CPU's model name from /proc/cpuinfo, or "unknown CPU"."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"
