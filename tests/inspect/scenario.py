"""The demo cluster behind the golden files and `examples/cluster-snapshot.yaml`.

* gpu-a: 2x Tesla T4. default/infer-1 (30 cores, 4 GiB) runs on GPU0; default/infer-2 (50 cores,
  proportional memory) is bound to GPU0 but not admitted yet (pending); default/rogue asks for
  vgpu without an assignment (bound around the scheduler); default/done finished (holds nothing).
* gpu-b: 4x A100-80GB, GPU3 unhealthy. ml/train (200 cores = GPU0+GPU1); ml/tf-worker-0 on GPU2.
* gpu-c: mixed 2x A100-80GB + 1x L4, NotReady. ml/tf-worker-1..3, one per GPU.
* cpu-1: no vgpu. ml/tf-ps-0 (CPU only) runs there.
* Gangs: ml/tfjob (PS + 4 workers, min 5, Running) and ml/bert (3 unscheduled workers, min 3).
"""

from __future__ import annotations

from tests.inspect.builders import Obj, node, pod
from vgpu.inspect.snapshot import Snapshot

T4 = ("Tesla T4", 15360)
A100 = ("NVIDIA A100-SXM4-80GB", 81920)
L4 = ("NVIDIA L4", 23034)

TF = {
    "pod-group.scheduling.sigs.k8s.io/name": "tfjob",
    "pod-group.scheduling.sigs.k8s.io/min-available": "5",
}
BERT = {"scheduling.x-k8s.io/pod-group": "bert"}


SNAPSHOT_HEADER = """\
# A saved cluster for `kubectl inspect vgpu --fake-cluster examples/cluster-snapshot.yaml`
# (the format `--save-snapshot FILE` writes; vgpu/inspect/snapshot.py describes it). Try:
#   kubectl-inspect-vgpu --fake-cluster examples/cluster-snapshot.yaml        # the table
#   kubectl-inspect-vgpu --fake-cluster examples/cluster-snapshot.yaml -d     # pods, gangs
#   kubectl-inspect-vgpu --fake-cluster examples/cluster-snapshot.yaml -l kubernetes.io/hostname=gpu-b
# What is in it:
#   gpu-a  2x T4: infer-1 runs on GPU0 (30 cores, 4 GiB); infer-2 is bound there but not yet
#          admitted (PENDING); rogue asks for vgpu without an assignment (a Problem).
#   gpu-b  4x A100-80GB, GPU3 unhealthy (!): ml/train holds GPU0+GPU1, tf-worker-0 GPU2.
#   gpu-c  2x A100-80GB + L4, NotReady: tf-worker-1..3, one GPU each.
#   cpu-1  no vgpu GPUs (listed under "Nodes without vgpu").
#   Gangs: ml/tfjob (5 members, Running) and ml/bert (3 workers waiting: Unscheduled, with
#          the scheduler's last message); default/h100 asks a GPU type no node has (a Problem).
#   The extender's Lease, renewed 2 s before the snapshot: "Extender: up".
# Generated from tests/inspect/scenario.py; tests/inspect/test_golden.py keeps it in step.
"""


def demo_cluster() -> Snapshot:
    nodes = (
        node("gpu-a", [T4, T4], ip="10.0.0.11"),
        node("gpu-b", [A100] * 4, unhealthy=(3,), ip="10.0.0.12"),
        node("gpu-c", [A100, A100, L4], ip="10.0.0.13", ready=False),
        node("cpu-1", None, ip="10.0.0.21"),
    )
    pods = (
        pod(
            "default/infer-1",
            node="gpu-a",
            asks={"main": (30, 16)},
            shares={"main": [(0, 30, 4096)]},
        ),
        pod(
            "default/infer-2",
            node="gpu-a",
            asks={"main": (50, 0)},
            shares={"main": [(0, 50, 7680)]},
            phase="Pending",
        ),
        pod("default/rogue", node="gpu-a", asks={"main": (20, 0)}, phase="Pending"),
        pod(
            "default/done",
            node="gpu-a",
            asks={"main": (100, 0)},
            shares={"main": [(1, 100, 15360)]},
            phase="Succeeded",
        ),
        pod(
            "ml/train",
            node="gpu-b",
            asks={"trainer": (200, 0), "logger": (0, 0)},
            shares={"trainer": [(0, 100, 81920), (1, 100, 81920)]},
            admitted="trainer",
        ),
        pod("ml/tf-ps-0", node="cpu-1", labels=TF),
        pod(
            "ml/tf-worker-0",
            node="gpu-b",
            asks={"tf": (100, 0)},
            shares={"tf": [(2, 100, 81920)]},
            labels=TF,
        ),
        *(
            pod(
                f"ml/tf-worker-{i}",
                node="gpu-c",
                asks={"tf": (100, 0)},
                shares={"tf": [(i - 1, 100, mib)]},
                labels=TF,
            )
            for i, mib in ((1, 81920), (2, 81920), (3, 23034))
        ),
        *(
            unschedulable(
                pod(f"ml/bert-{i}", asks={"main": (100, 0)}, phase="Pending", labels=BERT),
                "0/4 nodes are available: 1 node(s) had no vgpu GPUs, 3 gang ml/bert: no "
                "placement fits 3 members at once.",
            )
            for i in range(3)
        ),
        pod(
            "default/h100",
            asks={"main": (50, 0)},
            phase="Pending",
            annotations={"vgpu.io/gpu-type": "H100"},
        ),
    )
    groups = (
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "bert", "namespace": "ml"},
            "spec": {"minMember": 3},
        },
    )
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "vgpu-extender", "namespace": "vgpu-system"},
        "spec": {
            "holderIdentity": "vgpu-extender-6d5f9c-x2x7q",
            "leaseDurationSeconds": 15,
            "renewTime": "2025-01-01T11:59:58.000000Z",
        },
    }
    return Snapshot(
        nodes, pods, groups, "2025-01-01T12:00:00Z", extender_lease=lease, lease_read=True
    )


def unschedulable(obj: Obj, message: str) -> Obj:
    """The PodScheduled condition kube-scheduler writes on a pod it could not place."""
    obj["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": "2025-01-01T11:58:00Z",
        }
    ]
    return obj


def wide_cluster() -> Snapshot:
    """Three 8-GPU nodes (the layout that overflows a terminal): a100-0 half shared, half
    whole-GPU training, GPU7 unhealthy; a100-1 one pending 4-GPU pod; h-2 idle, NotReady."""
    nodes = (
        node("a100-0", [A100] * 8, unhealthy=(7,), ip="10.0.1.10"),
        node("a100-1", [A100] * 8, ip="10.0.1.11"),
        node("l4-2", [L4] * 8, ip="10.0.1.12", ready=False),
    )
    pods = (
        *(
            pod(
                f"serve/infer-{g}",
                node="a100-0",
                asks={"m": (25, 0)},
                shares={"m": [(g, 25, 20480)]},
            )
            for g in range(4)
        ),
        pod(
            "ml/train",
            node="a100-0",
            asks={"m": (300, 0)},
            shares={"m": [(g, 100, 81920) for g in (4, 5, 6)]},
        ),
        pod(
            "ml/big",
            node="a100-1",
            asks={"m": (400, 0)},
            shares={"m": [(g, 100, 81920) for g in range(4)]},
            phase="Pending",
        ),
    )
    return Snapshot(nodes, pods, (), "2025-01-01T12:00:00Z")
