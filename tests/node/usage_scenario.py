"""A node with GPU processes: fake cgroup files, a recording process killer, a running pod with
its container IDs in the pod status, and a `/metrics` scraper over real HTTP."""

from __future__ import annotations

import threading
import urllib.request
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from tests.node.agent_harness import Box
from vgpu.adapters.fakegpu import FakeGpuBackend

GIB = 1024**3
MIB = 1024**2


def cgroup_v2(pod_uid: str, cid: str) -> str:
    """What /proc/<pid>/cgroup says for a process of a containerd container, systemd driver."""
    slice_uid = pod_uid.replace("-", "_")
    return (
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{slice_uid}.slice/"
        f"cri-containerd-{cid}.scope\n"
    )


HOST_PROCESS = "0::/system.slice/some-daemon.service\n"


@dataclass
class FakeCgroups:
    """`CgroupReader` over a dict; a PID missing from it has exited. `then[pid]` scripts the
    answers of successive reads (the last one sticks), e.g. a PID reused between two reads."""

    files: dict[int, str] = field(default_factory=dict)
    then: dict[int, list[str | None]] = field(default_factory=dict)

    def read(self, pid: int) -> str | None:
        script = self.then.get(pid)
        if script:
            return script.pop(0) if len(script) > 1 else script[0]
        return self.files.get(pid)


@dataclass
class RecordingKiller:
    """`ProcessKiller` that records PIDs and ends them in the fake GPU backend, never signals."""

    backend: FakeGpuBackend
    cgroups: FakeCgroups
    killed: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def kill(self, pid: int) -> None:
        with self.lock:
            self.killed.append(pid)
        self.backend.end_process(pid)
        self.cgroups.files.pop(pid, None)


def run_pod(box: Box, name: str, containers: dict[str, str]) -> str:
    """Mark pod `name` Running with containerd IDs per container; returns its UID."""
    pod = box.pod(name)
    pod["status"] = {
        "phase": "Running",
        "containerStatuses": [
            {"name": c, "containerID": f"containerd://{cid}", "ready": True}
            for c, cid in containers.items()
        ],
    }
    box.api.store.put(pod)
    return str(pod["metadata"]["uid"])


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int | None) -> Samples:
    """GET /metrics over HTTP; {(sample name, labels): value}."""
    assert port, "the agent serves no /metrics"
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.status == 200
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def names(samples: Samples, name: str) -> list[dict[str, str]]:
    return [dict(labels) for n, labels in samples if n == name]
