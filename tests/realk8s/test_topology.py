"""A real kubelet with `topologyManagerPolicy: single-numa-node` (container and pod scope).

The machine has one NUMA node, which is all the kubelet's topology manager can know of (cadvisor's
machine topology, `numa_info.go` in pkg/kubelet/cm/topologymanager). What that means upstream:

- a merged hint equal to every NUMA node is turned into "don't care" (`Merge` in
  policy_single_numa_node.go), so with one node the device manager is never told to narrow the
  devices it offers (`filterByAffinity` in pkg/kubelet/cm/devicemanager/manager.go): the
  narrowing refusal (the kubelet offering another GPU's IDs, refused by the agent) needs two
  NUMA nodes and is shown in the kubelet model (bench/handoff_soak.py), not here;
- NUMA IDs a plugin reports that the machine lacks are dropped from the hints
  (`deviceNUMANodes` in devicemanager/topology_hints.go), but the hints still count only devices
  on known nodes: when those cannot serve a request there is no preferred hint and the policy
  refuses the pod (`TopologyAffinityError`, scope_pod.go / scope_container.go).

Shown here: share and whole-GPU pods get exactly their assignment under the policy, with the
agent's default (no NUMA node reported) and with `--report-numa`; fake GPUs on a NUMA node the
machine lacks strand their capacity under `--report-numa` and not under the default.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.realk8s import pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.grants import given, granted
from tests.realk8s.nodes import NodeSpec
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import Obj, Rest
from vgpu.api.assignment import ASSIGNMENT, decode
from vgpu.api.inventory import parse_inventory
from vgpu.api.resources import ResourceNames

pytestmark = pytest.mark.realk8s

NODE = "node-b"
POLICY = "single-numa-node"
SHARES = {"numa-30": (30, 16), "numa-50": (50, 32), "numa-70": (70, 8), "numa-100": (100, 0)}


@pytest.fixture(scope="module")
def node(real_cluster: RealCluster) -> Iterator[RealCluster]:
    """NODE reconfigured by each test; as the session started it afterwards."""
    original = real_cluster.nodes[NODE]
    yield real_cluster
    pods.delete_all(real_cluster.admin)
    real_cluster.restart_node(original)


def _restart(cluster: RealCluster, spec: NodeSpec) -> float:
    pods.delete_all(cluster.admin)
    seconds = cluster.restart_node(spec)
    print(
        f"{NODE} as {spec.topology_policy}/{spec.topology_scope} {spec.agent_flags}: {seconds:.1f}s"
    )
    return seconds


def _pinned(name: str, cores: int, memory: int) -> Obj:
    pod = pods.pod(name, pods.container("main", cores, memory))
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": NODE}
    return pod


def _kubelet_says(cluster: RealCluster, pod: str) -> str:
    """What the kubelet logged of the pod's topology hints and affinity (one text)."""
    log = cluster.procs.log(f"kubelet-{NODE}").read_text(errors="replace")
    return "\n".join(ln for ln in log.splitlines() if f'pod="default/{pod}"' in ln)


@pytest.mark.parametrize(
    ("scope", "flags"), [("container", ()), ("pod", ("--report-numa",))], ids=["default", "numa"]
)
def test_single_numa_node_admits_shares_with_their_grant(
    node: RealCluster, scope: str, flags: tuple[str, ...]
) -> None:
    _restart(node, NodeSpec(NODE, topology_policy=POLICY, topology_scope=scope, agent_flags=flags))
    api = node.admin
    for name, (cores, memory) in SHARES.items():
        api.post(pods.PODS, _pinned(name, cores, memory))
    for name, (cores, _) in SHARES.items():
        want = granted(pods.wait_running(api, name, timeout=90))["main"]
        assert want["VGPU_CORES"] == str(cores)
        assert given(node, name, "main") == want
        said = _kubelet_says(node, name)
        assert '"Topology Affinity"' in said, said  # the policy admitted it
        numa_hint = '"vgpu.io/cores":[{"NUMANodeAffinity":1,"Preferred":true}]'
        assert (numa_hint in said) == bool(flags), said  # bitmask 1: NUMA node 0


def _numa_file(directory: Path) -> str:
    """Four fake A100s, two on NUMA node 0 and two on node 1, which this machine lacks."""
    path = directory / "gpus-numa.yaml"
    gpus = [{"model": "A100-SXM4-80GB", "numa": i // 2} for i in range(4)]
    path.write_text(yaml.safe_dump({"gpus": gpus}))
    return str(path)


def _numa_of_assigned(cluster: RealCluster, api: Rest, name: str) -> int:
    """The NUMA node (per the fake GPU file) of the GPU the pod's assignment names."""
    annotations = pods.get(api, name)["metadata"].get("annotations", {})
    uuid = decode(annotations[ASSIGNMENT]).containers[0].shares[0].uuid
    annotations = cluster.admin.get(f"/api/v1/nodes/{NODE}")["metadata"]["annotations"]
    inventory = parse_inventory(annotations[ResourceNames().inventory])
    return int(next(g.numa for g in inventory.gpus if g.uuid == uuid) or 0)


def _outcome(api: Rest, name: str, timeout: float = 60) -> Obj:
    def done() -> Obj | None:
        status: Obj = pods.get(api, name).get("status", {})
        return status if status.get("phase") in ("Running", "Failed") else None

    result: Obj = wait_until(done, timeout, f"pod {name} Running or Failed")
    return result


def test_unknown_numa_node_is_ignored_by_default(node: RealCluster, tmp_path: Path) -> None:
    """The agent's default reports no NUMA node: four whole GPUs, two of them on a NUMA node
    the kubelet does not know, are all admitted with their grants."""
    gpus = _numa_file(tmp_path)
    _restart(node, NodeSpec(NODE, gpus=gpus, topology_policy=POLICY, topology_scope="pod"))
    api = node.admin
    for i in range(4):
        api.post(pods.PODS, _pinned(f"whole-{i}", 100, 0))
    seen = set()
    for i in range(4):
        want = granted(pods.wait_running(api, f"whole-{i}", timeout=90))["main"]
        assert given(node, f"whole-{i}", "main") == want
        seen.add(_numa_of_assigned(node, api, f"whole-{i}"))
    assert seen == {0, 1}


def test_unknown_numa_node_reported_strands_its_gpus(node: RealCluster, tmp_path: Path) -> None:
    """With --report-numa, hints count only node-0 devices: a pod is admitted (with its grant,
    whichever node its GPU is on, as the merged hint {0} means "any" on this machine) exactly
    while node 0 still has the devices it asks; then it is refused by the policy
    (TopologyAffinityError) although GPUs on the unknown node are free."""
    gpus = _numa_file(tmp_path)
    spec = NodeSpec(NODE, gpus, POLICY, "pod", ("--report-numa",))
    _restart(node, spec)
    api = node.admin
    node0_free, outcomes = 200, []
    for i in range(4):
        name = f"whole-{i}"
        api.post(pods.PODS, _pinned(name, 100, 0))
        status = _outcome(api, name)
        numa = _numa_of_assigned(node, api, name)
        outcomes.append(f"{name}@numa{numa}:{status.get('reason') or status['phase']}")
        if node0_free >= 100:
            assert status["phase"] == "Running", outcomes
            assert given(node, name, "main") == granted(pods.get(api, name))["main"]
            node0_free -= 100 if numa == 0 else 0
        else:
            assert status["phase"] == "Failed", outcomes
            assert status.get("reason") == "TopologyAffinityError", status
    assert any("TopologyAffinityError" in o for o in outcomes), outcomes
    print(f"--report-numa, NUMA node 1 unknown to the kubelet: {outcomes}")
