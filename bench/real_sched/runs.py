"""One measured variant of bench/real_scheduler_bench.py: the same pods, created while
kube-scheduler is stopped, then kube-scheduler started and its bindings timed from its own log
(first to last binding), so the rate is the scheduler's and not the client's."""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import real_metrics
from bench.real_sched import dra
from bench.real_sched.fill import GPUS
from tests.realk8s import pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.rest import Rest
from vgpu.api.assignment import ADMITTED

Obj = dict[str, Any]
Edit = Callable[[Obj], None]
MINE = {"vgpu-bench": "1"}  # the measured pods: polled by label, never the 1,000s of fill pods
QUERY = "?labelSelector=vgpu-bench%3D1"
SHARE = "bench-share-50"  # the DRA pods' ResourceClaimTemplate: 50 cores, half the memory
NOW = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler", "extender-0", "kube-controller-manager")
ALGORITHM_MS: dict[str, float | None] = {}
"""kube-scheduler's scheduling-algorithm ms per pod of each variant run (for `added`)."""
RATES: dict[str, float] = {}
"""pods/s of each variant run (for `added`)."""


def bound(admin: Rest, prefix: str) -> int:
    """How many pods named `prefix*` are bound; each newly bound one is marked admitted, as the
    node agent would once the kubelet admits it (no kubelets run here, and the hand-off keeps a
    second pod of the same shape waiting on a node until the first is admitted)."""
    items = admin.get(pods.PODS + QUERY + "&fieldSelector=spec.nodeName%21%3D")["items"]
    mine = [p for p in items if p["metadata"]["name"].startswith(prefix)]
    for pod in mine:
        if ADMITTED not in pod["metadata"].get("annotations", {}):
            names = json.dumps([c["name"] for c in pod["spec"]["containers"]])
            patch = {"metadata": {"annotations": {ADMITTED: names}}}
            admin.merge_patch(f"{pods.PODS}/{pod['metadata']['name']}", patch)
    return len(mine)


BOUND = re.compile(
    r'^I\d{4} (\d\d):(\d\d):(\d\d\.\d+) .*"Successfully bound pod to node" pod="default/(\S+)"'
)


def binding_times(log: Path, prefix: str) -> list[float]:
    """Seconds of day at which kube-scheduler logged each binding of a pod named `prefix*`."""
    times = []
    for line in log.read_text(errors="replace").splitlines():
        match = BOUND.match(line)
        if match and match.group(4).startswith(prefix):
            h, m, sec = match.groups()[:3]
            times.append(int(h) * 3600 + int(m) * 60 + float(sec))
    return sorted(times)


def _batch(prefix: str, count: int, claims: bool) -> list[Obj]:
    """The measured pods: one container asking 50 cores, as vgpu.io/cores or through the
    share template."""
    if claims:
        main = pods.container("main")
        return [dra.claim_pod(f"{prefix}{i:04d}", SHARE, main, MINE) for i in range(count)]
    return [
        pods.pod(f"{prefix}{i:04d}", pods.container("main", 50), labels=MINE) for i in range(count)
    ]


def run(cluster: RealCluster, label: str, count: int, timeout: float, edit: Edit) -> None:
    """One variant: create the pods with kube-scheduler stopped (for DRA, wait until the
    resource-claim controller has made their claims), start it, time its bindings."""
    admin, claims = cluster.admin, label.startswith("dra")
    prefix = f"bench-{label}-"
    cluster.procs.stop("kube-scheduler")
    batch = _batch(prefix, count, claims)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: admin.post(pods.PODS, p), batch))
    if claims:
        took = dra.wait_claims_made(admin, QUERY, count, timeout)
        print(f"  (the resource-claim controller made {count} claims in {took:.0f}s)", flush=True)
    extender_url = f"https://127.0.0.1:{cluster.ports['extender']}/metrics"
    before = real_metrics.scrape(extender_url, cluster.pki, verify=True)
    started = time.monotonic()
    cluster.start_scheduler(edit=edit)
    cpu_before = _cpu(cluster)
    done = 0
    while time.monotonic() - started < timeout:
        done = bound(admin, prefix)
        if done >= count:
            break
        time.sleep(0.1)
    times = binding_times(cluster.procs.log("kube-scheduler"), prefix)
    span = times[-1] - times[0] if len(times) > 1 else float("nan")
    rate = (len(times) - 1) / span if len(times) > 1 and span > 0 else float("nan")
    RATES[label] = rate
    print(
        f"  {label:<24} {done}/{count} bound; first to last binding {span:6.2f}s: "
        f"{rate:6.1f} pods/s",
        flush=True,
    )
    after = real_metrics.scrape(extender_url, cluster.pki, verify=True)
    scheduler_url = f"https://127.0.0.1:{cluster.ports['scheduler']}/metrics"
    after.update(real_metrics.scrape(scheduler_url, cluster.pki, verify=False))
    print(f"    per call: {real_metrics.report(before, after)}", flush=True)
    ALGORITHM_MS[label] = real_metrics.algorithm_ms(before, after)
    cpu = real_metrics.cpu_report(cpu_before, _cpu(cluster), count)
    print(f"    CPU ms per pod (scheduler start to last bind): {cpu}", flush=True)
    _delete(admin, batch, prefix if claims else "")


def _delete(admin: Rest, batch: list[Obj], claim_prefix: str) -> None:
    """Delete the pods; with `claim_prefix`, wait until the resource-claim controller has
    deleted their generated claims too (their allocations would hold the next run's GPUs)."""
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda p: admin.request("DELETE", f"{pods.PODS}/{p['metadata']['name']}", NOW),
                batch,
            )
        )
    if claim_prefix and not dra.release_claims(admin, claim_prefix, 300):
        print(f"    (claims {claim_prefix}* still allocated after 300s)", flush=True)


def added() -> None:
    """What the extender and the DRA allocator add to kube-scheduler's time per pod, against
    kube-scheduler alone in the same cluster (the issue's measure), and their pods/s."""
    for scored in ("pct-100", "default-pct"):
        alone = ALGORITHM_MS.get(f"no-extender-{scored}")
        for label, ms in ALGORITHM_MS.items():
            if label.startswith("no-extender") or not label.endswith(scored):
                continue
            ratio = f"{100 * (ms / alone - 1):+.0f} %" if alone and ms else "n/a"
            print(
                f"  {label}: {ratio} per pod over kube-scheduler alone "
                f"({ms or float('nan'):.2f} against {alone or float('nan'):.2f} ms); "
                f"{RATES.get(label, float('nan')):.1f} pods/s",
                flush=True,
            )


def _cpu(cluster: RealCluster) -> dict[str, float]:
    children = cluster.procs.children
    return {n: real_metrics.cpu_seconds(children[n].pid) for n in COMPONENTS if n in children}


def sample_run(cluster: RealCluster, label: str, timeout: float, edit: Edit) -> None:
    """Eight trials of one whole-GPU pod that only the one empty node can take (the pod is
    deleted after binding): how long each takes to bind and how many scheduling attempts failed
    on the way, i.e. how often kube-scheduler's node sample missed the node that fits."""
    admin = cluster.admin
    prefix = f"sample-{label}-"
    cluster.start_scheduler(edit=edit)
    waits = []
    for trial in range(GPUS):
        name = f"{prefix}{trial}"
        started = time.monotonic()
        admin.post(pods.PODS, pods.pod(name, pods.container("main", 100), labels=MINE))
        while time.monotonic() - started < timeout and not bound(admin, name):
            time.sleep(0.05)
        waits.append(time.monotonic() - started)
        admin.request("DELETE", f"{pods.PODS}/{name}", NOW)
        time.sleep(1)  # the extender sees the GPU free again
    log = cluster.procs.log("kube-scheduler").read_text(errors="replace")
    failed = sum(
        1 for line in log.splitlines() if "Unable to schedule pod" in line and prefix in line
    )
    print(
        f"  {label:<24} {len(waits)} trials: time to bind median {statistics.median(waits):.1f}s, "
        f"max {max(waits):.1f}s; {failed} failed attempts in all",
        flush=True,
    )
