"""Where a pod's time goes in bench/real_scheduler_bench.py: kube-scheduler's own per-attempt
time and the extender's server-side time per verb, read from their /metrics.

kube-scheduler: `scheduler_scheduling_attempt_duration_seconds` (one scheduling cycle: filter,
score and the extenders' filter and prioritize calls; pkg/scheduler/metrics/metrics.go) and
`scheduler_framework_extension_point_duration_seconds` per extension point, and
`scheduler_scheduling_algorithm_duration_seconds` (the serial part: filter and score, the
extenders' calls included; the attempt's figure includes the asynchronous binding). The extender:
`vgpu_extender_request_seconds{verb}` (vgpu/extender/metrics.py). Both as sum and count, so a
run's mean is the difference of two scrapes.
"""

from __future__ import annotations

import os
import pstats
import re
import ssl
import urllib.request
from collections import defaultdict
from pathlib import Path

SAMPLE = re.compile(r"^(\w+?)_(sum|count|total)(?:\{(.*)\})? (\S+)$")
WANTED = (
    "scheduler_scheduling_attempt_duration_seconds",
    "scheduler_scheduling_algorithm_duration_seconds",
    "scheduler_framework_extension_point_duration_seconds",
    "vgpu_extender_request_seconds",
    "vgpu_extender_connections",  # a counter: its count is its value
)
KEYS = ("verb", "extension_point", "result")

Totals = dict[str, list[float]]  # "metric[label]" -> [sum, count]


def scrape(url: str, pki: Path, *, verify: bool) -> Totals:
    """Sum and count of the wanted histograms at `url`, by the label that matters. `verify`:
    check the server against the cluster's CA (kube-scheduler serves a self-signed
    certificate of its own on loopback: not checked)."""
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, context=context, timeout=10) as reply:
            text = reply.read().decode()
    except OSError as err:
        print(f"    (no metrics from {url}: {err})", flush=True)
        return {}
    totals: Totals = defaultdict(lambda: [0.0, 0.0])
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if not match or match.group(1) not in WANTED:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(3) or ""))
        label = ",".join(labels[k] for k in KEYS if k in labels)
        entry = totals[f"{match.group(1)}[{label}]"]
        entry[0 if match.group(2) == "sum" else 1] += float(match.group(4))
        if match.group(2) == "total":
            entry[0] = 0.0
    return dict(totals)


def report(before: Totals, after: Totals) -> str:
    """Mean milliseconds per call of each histogram that moved between two scrapes (those
    under 0.01 ms left out)."""
    parts = []
    for key in sorted(after):
        total, count = after[key]
        old = before.get(key, [0.0, 0.0])
        calls = count - old[1]
        if key.startswith("vgpu_extender_connections"):
            parts.append(f"extender connections accepted {calls:.0f}")
        elif calls > 0 and total - old[0] >= 1e-5 * calls:
            short = key.replace("scheduler_", "").replace("_duration_seconds", "")
            short = short.replace("vgpu_extender_request_seconds", "extender")
            parts.append(f"{short} {1000 * (total - old[0]) / calls:.2f}ms x{calls:.0f}")
    return "; ".join(parts)


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process so far (/proc/PID/stat), 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_report(before: dict[str, float], after: dict[str, float], pods: int) -> str:
    """CPU milliseconds per pod of each component between two readings."""
    return ", ".join(
        f"{name} {1000 * (after[name] - before.get(name, 0.0)) / pods:.1f}" for name in after
    )


def print_profile(path: Path, top: int = 25) -> None:
    """The profiled extender's functions by own time, then by cumulative time."""
    if not path.exists():
        print(f"no profile at {path} (the extender did not exit cleanly)")
        return
    stats = pstats.Stats(str(path))
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


ALGORITHM = "scheduler_scheduling_algorithm_duration_seconds[]"


def algorithm_ms(before: Totals, after: Totals) -> float | None:
    """kube-scheduler's mean scheduling-algorithm time per pod between two scrapes, in ms."""
    total, count = after.get(ALGORITHM, [0.0, 0.0])
    old = before.get(ALGORITHM, [0.0, 0.0])
    return 1000 * (total - old[0]) / (count - old[1]) if count > old[1] else None
