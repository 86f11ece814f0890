"""The DRA driver's memory limits end to end on the simulated node: preparing a claim sets the
driver's hard limit of the pod it is reserved for through the stand-in NVML, and a program of
that pod run with no interposer at all (a "static" program as far as enforcement goes) is
refused past the claim's memory by the stand-in driver.

The preparation runs `vgpu.daemons.dra_driver.limits.ClaimLimits` in a child that loads the
stand-in NVML, with the API server's answers (the pod and its claims) given as JSON; the node
is `tests/isolation/test_driver_limits.py`'s (a fake cgroup v2 tree, /proc/self/cgroup bound
in the sandbox)."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from tests.isolation.conftest import Cluster
from tests.isolation.test_driver_limits import MIB, OOM, POD, UID, DriverNode, driver, rc_of

__all__ = ["driver"]  # the fixture, used by name

PREPARE = r"""
import json, sys
from pathlib import Path
from vgpu.adapters.dmem import NvmlLimits
from vgpu.daemons.dra_driver.limits import ClaimLimits
from vgpu.node.model import GpuInfo
claims, pod, cgroupfs = json.loads(sys.argv[1]), json.loads(sys.argv[2]), Path(sys.argv[3])
gpus = {i: GpuInfo(uuid, i, "T4", 16384) for i, uuid in enumerate(json.loads(sys.argv[4]))}

class Api:  # the API server's answers: the pod, its claims
    def get_pod(self, namespace, name):
        return pod

    def get_resource_claim(self, namespace, name):
        return claims[name]

refused = ClaimLimits(Api(), NvmlLimits(), cgroupfs).apply(claims["a"], "node", gpus)
print(repr(refused and refused.reason))
"""


def _claim(name: str, device: str, memory: str) -> dict[str, object]:
    result = {
        "request": "gpu",
        "driver": "vgpu.io",
        "pool": "node",
        "device": device,
        "consumedCapacity": {"cores": "30", "memory": memory},
    }
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": f"claim-{name}"},
        "status": {
            "allocation": {"devices": {"results": [result]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": UID}],
        },
    }


def test_a_claims_pod_is_refused_past_its_claims_memory_without_the_interposer(
    driver: DriverNode, cluster: Cluster
) -> None:
    driver.cgroup(POD)
    claims = {"a": _claim("a", "gpu-0", "768Mi"), "b": _claim("b", "gpu-0", "256Mi")}
    pod = {
        "metadata": {"name": "p", "namespace": "ml", "uid": UID},
        "spec": {"resourceClaims": [{"name": n, "resourceClaimName": n} for n in claims]},
    }
    uuids = [g.uuid for g in cluster.node.gpus]
    args = (json.dumps(claims), json.dumps(pod), str(driver.cgroupfs), json.dumps(uuids))
    done = driver.child(PREPARE, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "None"  # prepared: no refusal
    steps = (f"alloc:{800 * MIB}", f"alloc:{200 * MIB}")
    inside = driver.run(f"{POD}/ctr1", *steps)  # the two claims together: 1 GiB on gpu-0
    assert rc_of(inside, steps[0]) == 0
    assert rc_of(inside, steps[1]) == OOM  # 64 MiB context + 800 + 200 > 768 + 256 MiB
    outside = driver.run(f"/kubepods/burstable/pod{UID[:-1]}0/ctr1", *steps)
    assert [rc_of(outside, s) for s in steps] == [0, 0]


JOINING = r"""
import json, sys
from pathlib import Path
from vgpu.adapters.dmem import NvmlLimits
from vgpu.daemons.dra_driver.limits import ClaimLimits
from vgpu.dra.prepare import NodeGpus
from vgpu.node.model import GpuInfo
claim, pod, cgroupfs = json.loads(sys.argv[1]), json.loads(sys.argv[2]), Path(sys.argv[3])
gpus = {i: GpuInfo(uuid, i, "T4", 16384) for i, uuid in enumerate(json.loads(sys.argv[4]))}

class Api:  # the API server's answers: the joining pod, the claim
    def get_pod(self, namespace, name):
        return pod

    def get_resource_claim(self, namespace, name):
        return claim

node = NodeGpus("node", gpus)
limits = ClaimLimits(Api(), NvmlLimits(), cgroupfs)
"""  # a joining pod's limits in a child that loads the stand-in NVML: what JOIN and SERVE share
JOIN = (
    JOINING
    + r"""
import threading
from vgpu.daemons.dra_driver.joiners import Joiners
joiners = Joiners(limits, lambda: node, lambda uid: True, threading.Event())
joiners.seen("MODIFIED", claim)  # the watch: the claim, prepared here, now reserved for it
print(joiners.step())
"""
)
JOINER = "5f0c1a2e-0000-4000-8000-00000000d2ff"


def test_a_pod_joining_a_prepared_claim_is_refused_past_it_once_the_joiner_stepped(
    driver: DriverNode, cluster: Cluster
) -> None:
    """The kubelet makes no prepare call for a second pod of a prepared claim: until the
    driver's joiner sets its limit the pod's program is unlimited, after it the stand-in driver
    refuses it past the claim's memory, with no interposer."""
    cgroup = f"/kubepods/burstable/pod{JOINER}"
    driver.cgroup(cgroup)  # the kubelet's EnsureExists for the joining pod
    claim = _claim("a", "gpu-0", "768Mi")
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": "q", "uid": JOINER}]  # type: ignore[index]
    pod = {
        "metadata": {"name": "q", "namespace": "ml", "uid": JOINER},
        "spec": {"resourceClaims": [{"name": "a", "resourceClaimName": "a"}]},
    }
    steps = (f"alloc:{700 * MIB}", f"alloc:{200 * MIB}")
    before = driver.run(f"{cgroup}/ctr1", *steps)
    assert [rc_of(before, s) for s in steps] == [0, 0]  # the window: no limit yet
    uuids = [g.uuid for g in cluster.node.gpus]
    args = (json.dumps(claim), json.dumps(pod), str(driver.cgroupfs), json.dumps(uuids))
    done = driver.child(JOIN, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0"  # nobody left waiting for a cgroup
    after = driver.run(f"{cgroup}/ctr2", *steps)
    assert rc_of(after, steps[0]) == 0
    assert rc_of(after, steps[1]) == OOM  # 64 MiB context + 700 + 200 > 768 MiB


SERVE = (
    JOINING
    + r"""
from vgpu.adapters.hook_socket import HookSocket
from vgpu.adapters.procfs import ProcCgroupReader
from vgpu.daemons.dra_driver.hook import HookAnswers
from vgpu.dra.prepare import PreparedClaim
prepared = PreparedClaim(claim["metadata"]["uid"], "ml", "a", ())
answers = HookAnswers(limits, lambda: node, lambda uid: prepared if uid == prepared.uid else None,
                      ProcCgroupReader())
server = HookSocket(Path(sys.argv[5]), answers.answer)
server.start()
print("ready", flush=True)
sys.stdin.read()  # until the test is done with the socket
server.stop()
"""
)
HOOKED = "5f0c1a2e-0000-4000-8000-00000000d3ff"


def test_a_joining_pods_container_created_after_the_hook_is_refused_past_its_claim(
    driver: DriverNode, cluster: Cluster, tmp_path: Path
) -> None:
    """The real CDI hook (this build) asks the driver's answer over its socket, as the runtime
    runs it before the container: once it exits 0 the stand-in driver refuses the pod's
    program past the claim's memory, with no interposer and no joiner."""
    cgroup = f"/kubepods/burstable/pod{HOOKED}"
    driver.cgroup(cgroup)
    claim = _claim("a", "gpu-0", "768Mi")
    claim["metadata"]["uid"] = "c1a1-0a"  # type: ignore[index]
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": "h", "uid": HOOKED}]  # type: ignore[index]
    pod = {
        "metadata": {"name": "h", "namespace": "ml", "uid": HOOKED},
        "spec": {"resourceClaims": [{"name": "a", "resourceClaimName": "a"}]},
    }
    uuids = [g.uuid for g in cluster.node.gpus]
    with tempfile.TemporaryDirectory(prefix="hk", dir="/tmp") as short:
        sock = str(Path(short) / "hook.sock")
        args = (json.dumps(claim), json.dumps(pod), str(driver.cgroupfs), json.dumps(uuids), sock)
        with driver.serve(SERVE, *args) as server:
            assert server.stdout is not None and server.stdout.readline() == "ready\n"
            state = {"id": "c", "annotations": {"io.kubernetes.cri.sandbox-uid": HOOKED}}
            hook = str(cluster.build.library.parent / "vgpu-cdi-hook")
            done = subprocess.run(
                [hook, sock, "c1a1-0a"], input=json.dumps(state).encode(), capture_output=True
            )
            assert (done.returncode, done.stderr) == (0, b"")
    steps = (f"alloc:{700 * MIB}", f"alloc:{200 * MIB}")
    after = driver.run(f"{cgroup}/ctr1", *steps)
    assert rc_of(after, steps[0]) == 0
    assert rc_of(after, steps[1]) == OOM  # 64 MiB context + 700 + 200 > 768 MiB
