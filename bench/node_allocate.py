"""Node agent speed and size: hand-off Allocate / GetPreferredAllocation latency, and agent RSS.

1. Latency: an agent in this process with 8 fake A100s, the fake API server (real HTTP) and the
   stand-in kubelet (real unix sockets). Background pods stay pending on every GPU; each round
   binds one more pod, then times GetPreferredAllocation (all free core IDs offered) and
   Allocate over the socket, as the kubelet calls them. Targets: p99 <= 5 ms each.
2. Memory: `python -m vgpu.daemons.node_agent.cli` as a separate process with 8 fake GPUs, a kubeconfig for
   the fake API server and the stand-in kubelet; its VmRSS once registered and synced, then
   SIGTERM (it must exit 0). Target: <= 60 MiB. Then the same agent with credentials as in a pod:
   a `Configuration` filled directly, as the in-cluster loader does, so the kubeconfig loader
   (requests-oauthlib, PyYAML, the generated ApiClient's imports) is never imported; the fake API
   server speaks plain HTTP, which the real in-cluster loader does not allow.

    python bench/node_allocate.py [--rounds 300]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.kubeapi.server import FakeApiServer
from tests.kubelet_standin.kubelet import FakeKubelet
from vgpu.adapters.fakegpu import FakeGpuBackend
from vgpu.adapters.kube.calls import KubeApi
from vgpu.agent.agent import NodeAgent
from vgpu.agent.config import AgentConfig
from vgpu.api.assignment import binding_annotations
from vgpu.core.ids import GpuUUID, NodeName, PodKey
from vgpu.core.model import Assignment, ContainerAssignment, GpuShare

NODE, KEY, SPEC, CORES = "bench-node", b"bench-key", "8xA100-SXM4-80GB", "vgpu.io/cores"


def _pod(api: FakeApiServer, name: str, cores: int) -> dict[str, object]:
    limits = {CORES: str(cores)}
    container = {"name": "main", "image": "x", "resources": {"limits": limits}}
    return api.store.put(
        {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [container]},
            "status": {"phase": "Pending"},
        }
    )


def _bind(api: FakeApiServer, name: str, cores: int, gpu: str) -> PodKey:
    pod = _pod(api, name, cores)
    uid = str(pod["metadata"]["uid"])  # type: ignore[index]
    share = GpuShare(GpuUUID(gpu), cores, cores * 81920 * 10)
    key = PodKey(f"default/{name}")
    assignment = Assignment(
        key, NodeName(NODE), containers=(ContainerAssignment("main", (share,)),), uid=uid
    )
    client = api.api_client()
    try:
        KubeApi(client).bind_pod(
            "default", name, NODE, annotations=binding_annotations(assignment, KEY), uid=uid
        )
    finally:
        client.close()
    return key


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency(rounds: int, workdir: Path) -> None:
    api = FakeApiServer().start()
    api.store.put({"kind": "Node", "apiVersion": "v1", "metadata": {"name": NODE}})
    kubelet = FakeKubelet(workdir)
    kubelet.start()
    client = api.api_client()
    config = AgentConfig(
        node_name=NODE,
        assignment_key=KEY,
        plugin_dir=workdir,
        pod_resources_socket=workdir / "none.sock",
        watch_timeout_s=5,
        stop_grace_s=0.2,
    )
    agent = NodeAgent(config, FakeGpuBackend.from_spec(SPEC, seed=NODE), KubeApi(client))
    agent.start()
    try:
        assert agent.wait_ready(20), "agent not ready"
        assert kubelet.wait_for(lambda: len(kubelet.devices(CORES)) == 800, 10)
        gpus = sorted(g.uuid for g in FakeGpuBackend.from_spec(SPEC, seed=NODE).inventory().gpus)
        for n, gpu in enumerate(gpus):  # background: pending, never admitted, asks 60..67
            _bind(api, f"bg-{n}", 60 + n, gpu)
        preferred, allocate = [], []
        taken: set[str] = set()
        held: list[list[str]] = []
        for r in range(rounds):
            size, gpu = 1 + r % 5, gpus[r % 8]
            key = _bind(api, f"p-{r}", size, gpu)
            deadline = time.monotonic() + 5
            while not agent.handoff.candidates(agent.names.kind_of(CORES), size, frozenset({gpu})):
                assert time.monotonic() < deadline, f"agent never saw {key}"
                time.sleep(0.001)
            free = sorted(i for i in kubelet.devices(CORES) if i not in taken)
            time.sleep(0.02)  # let the agent finish patching the last admission (same GIL)
            t0 = time.perf_counter()
            ids = kubelet.preferred(CORES, free, [], size)
            t1 = time.perf_counter()
            kubelet.allocate_ids(CORES, ids)
            t2 = time.perf_counter()
            assert {i.split("::")[0] for i in ids} == {gpu}
            taken.update(ids)
            if r >= 8:  # the pod of 8 rounds ago finishes: its IDs and share come free
                api.store.remove("Pod", "default", f"p-{r - 8}")
                taken.difference_update(held.pop(0))
            held.append(ids)
            preferred.append((t1 - t0) * 1000)
            allocate.append((t2 - t1) * 1000)
        for name, values in (("GetPreferredAllocation", preferred), ("Allocate", allocate)):
            print(
                f"{name:24s} n={len(values)} p50={statistics.median(values):.2f} ms "
                f"p99={_pct(values, 0.99):.2f} ms max={max(values):.2f} ms (target p99 <= 5 ms)"
            )
    finally:
        agent.stop()
        kubelet.stop()
        client.close()
        api.stop()


def _kubeconfig(path: Path, url: str) -> None:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
        f"clusters: [{{name: fake, cluster: {{server: '{url}'}}}}]\n"
        "users: [{name: u, user: {}}]\n"
        "contexts: [{name: fake, context: {cluster: fake, user: u}}]\n"
    )


def _rss_mib(pid: int) -> tuple[float, float]:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


# The agent as in a pod, for `memory(in_pod=True)`: argv = [url, plugin dir, pod-resources socket].
POD_AGENT = f"""
import logging, sys
from pathlib import Path
from vgpu.adapters.kube.calls import KubeApi  # first: defers the kubernetes packages' __init__
from kubernetes.client.api_client import ApiClient
from kubernetes.client.configuration import Configuration
from vgpu.adapters.fakegpu import FakeGpuBackend
from vgpu.daemons.flags.keys import load_assignment_key
from vgpu.agent.agent import NodeAgent
from vgpu.agent.config import AgentConfig
logging.basicConfig(level=logging.INFO)
url, plugins, pod_resources = sys.argv[1:]
config = AgentConfig(
    node_name={NODE!r},
    assignment_key=load_assignment_key(None),
    plugin_dir=Path(plugins),
    pod_resources_socket=Path(pod_resources),
)
backend = FakeGpuBackend.from_spec({SPEC!r}, seed={NODE!r})
NodeAgent(config, backend, KubeApi(ApiClient(Configuration(host=url)))).run_until_signal()
"""


def memory(workdir: Path, arena: dict[str, str], *, in_pod: bool = False) -> None:
    api = FakeApiServer().start()
    api.store.put({"kind": "Node", "apiVersion": "v1", "metadata": {"name": NODE}})
    kubelet = FakeKubelet(workdir)
    kubelet.start()
    kubeconfig = workdir / "kubeconfig"
    _kubeconfig(kubeconfig, api.url)
    repo = Path(__file__).resolve().parents[1]
    argv = [
        sys.executable,
        "-m",
        "vgpu.daemons.node_agent.cli",
        "--fake-gpus",
        SPEC,
        "--node-name",
        NODE,
    ]
    argv += ["--device-plugin-dir", str(workdir), "--kubeconfig", str(kubeconfig)]
    argv += ["--pod-resources-socket", str(workdir / "none.sock"), "--metrics-port", "0"]
    if in_pod:
        argv = [sys.executable, "-c", POD_AGENT, api.url, str(workdir), str(workdir / "none.sock")]
    env = {**os.environ, "PYTHONPATH": str(repo), "VGPU_ASSIGNMENT_KEY": KEY.decode(), **arena}
    proc = subprocess.Popen(argv, cwd=repo, env=env, stderr=subprocess.DEVNULL)
    try:
        assert kubelet.wait_for(lambda: len(kubelet.registrations) >= 2, 30), "no registration"
        deadline = time.monotonic() + 10
        while not api.store.get("Node", None, NODE)["metadata"].get("labels"):  # type: ignore[index]
            assert time.monotonic() < deadline, "node never labelled"
            time.sleep(0.05)
        time.sleep(2.0)
        rss, peak = _rss_mib(proc.pid)
        how = " ".join(f"{k}={v}" for k, v in arena.items()) or "default malloc"
        how += ", credentials as in a pod" if in_pod else ", kubeconfig"
        print(f"agent RSS with 8 fake GPUs ({how}): {rss:.1f} MiB (peak {peak:.1f} MiB)")
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=15)
        print(f"SIGTERM: exited with {code} (expected 0)")
    finally:
        if proc.poll() is None:
            proc.kill()
        kubelet.stop()
        api.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    steps: list[Callable[[Path], object]] = [
        lambda d: latency(args.rounds, d),
        lambda d: memory(d, {}),
        lambda d: memory(d, {}, in_pod=True),
    ]
    for step in steps:
        workdir = Path(tempfile.mkdtemp(prefix="vgb"))
        try:
            step(workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
