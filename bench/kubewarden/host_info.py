"""What the benchmark reports say about the machine they ran on (kwctl_bench.py,
policy_server_bench.py, overshoot_bench.py, vram_nodes_bench.py, check_bench.py)."""

import os
import platform
import time
from datetime import datetime, timezone
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


def load_average():
    """The 1, 5 and 15 minute load averages, two decimals each: `0.52 0.61 0.70`."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_meta(started, load_before):
    """What a report says about its run: `date` (UTC, to the minute), `host` (cores, CPU model,
    kernel), `load_before` (as given, from load_average()), `load_after` (now) and `seconds` since
    `started` (a time.monotonic() reading)."""
    return {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "host": f"{os.cpu_count()} x {cpu_model()}, Linux {platform.release()}",
            "load_before": load_before, "load_after": load_average(),
            "seconds": time.monotonic() - started}
