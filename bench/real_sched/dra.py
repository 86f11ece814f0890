"""The DRA path of bench/real_scheduler_bench.py: what kube-scheduler's own allocator needs to
place the same pods on the same nodes through vgpu's DRA driver's ResourceSlices.

* The chart's DeviceClass (`vgpu.io`), read from the chart's template.
* Per node, the ResourceSlice our driver would publish, built by `vgpu.dra.slices.build_slice`
  (what ships), in the chart's default slice order (`dra.sliceOrder: index`), for the same eight
  fake A100s (same UUIDs) as the extender's inventory annotation. No driver process runs (there
  is no kubelet to register with); the slice is what it would publish, owned by the Node.
* The half-full state held through **allocated ResourceClaims**, as the scheduler leaves them:
  per node one claim reserved for one bound fill pod, its `status.allocation` written as
  kube-scheduler's PreBind writes it (results with `consumedCapacity` and a `shareID`, the node
  selector, the delete-protection finalizer). Even nodes: four whole GPUs (each device's full
  capacity); odd nodes: 50 cores and half the memory of each of the eight. The allocator then
  counts capacity in use from the claims, as in a live cluster, rather than from slices shrunk
  to the free capacity (no driver publishes that).
* The measured pods ask the same share (50 cores; half the memory, what the extender grants a
  cores-only ask) through one **ResourceClaimTemplate**, what users write; kube-controller-manager's
  resource-claim controller makes each pod's claim, as in a real cluster.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from bench.real_sched.fill import GPU_MIB, GPUS, MODEL, gpu_uuid
from tests.realk8s import pods
from tests.realk8s.cluster import REPO, RealCluster
from tests.realk8s.rest import Rest
from tests.realk8s.test_dra import _start_controller_manager
from vgpu.api.dra import API_VERSION, CORES, DRIVER, MEMORY, device_name
from vgpu.dra.slices import build_slice
from vgpu.node.model import GpuInfo, GpuInventory

Obj = dict[str, Any]
RESOURCE = "/apis/resource.k8s.io/v1"
CLAIMS = f"{RESOURCE}/namespaces/default/resourceclaims"
TEMPLATES = f"{RESOURCE}/namespaces/default/resourceclaimtemplates"
MEMORY_UNIT_MIB = 256  # the chart's memoryUnitMiB
FINALIZER = "resource.kubernetes.io/delete-protection"  # what kube-scheduler adds on allocation
DEVICE_CLASS_TEMPLATE = REPO / "charts" / "vgpu" / "templates" / "dra" / "deviceclass.yaml"


def device_class(template: Path = DEVICE_CLASS_TEMPLATE) -> Obj:
    """The chart's DeviceClass without its template lines (only labels are templated)."""
    text = "\n".join(line for line in template.read_text().splitlines() if "{{" not in line)
    obj: Obj = yaml.safe_load(text)
    obj["metadata"] = {"name": obj["metadata"]["name"]}
    return obj


def start(cluster: RealCluster) -> None:
    """The DeviceClass, and kube-controller-manager running the resource-claim controller."""
    cluster.admin.post(f"{RESOURCE}/deviceclasses", device_class())
    _start_controller_manager(cluster)


def inventory(node: str) -> GpuInventory:
    gpus = tuple(GpuInfo(gpu_uuid(node, i), i, MODEL, GPU_MIB) for i in range(GPUS))
    return GpuInventory(gpus)


def mebi(mib: int) -> str:
    return f"{mib}Mi"


def share_memory_mib(cores: int, gpu_mib: int = GPU_MIB) -> int:
    """The memory of a `cores` share in whole memory units: the proportional share rounded
    down (at least one unit), so shares whose cores fit a GPU also fit its memory, as the
    extender's exactly proportional memory does."""
    units = cores * gpu_mib // 100 // MEMORY_UNIT_MIB
    return max(1, units) * MEMORY_UNIT_MIB


def publish_slice(admin: Rest, node: str, node_uid: str) -> None:
    """The node's ResourceSlice as our driver builds it."""
    obj = build_slice(node, inventory(node), memory_unit_mib=MEMORY_UNIT_MIB, node_uid=node_uid)
    admin.post(f"{RESOURCE}/resourceslices", obj)


def _fill_shape(index: int) -> tuple[int, int, int]:
    """(devices, cores each, MiB each) of node `index`'s fill: the extender's fill, in DRA."""
    if index % 2 == 0:
        return 4, 100, GPU_MIB
    return GPUS, 50, share_memory_mib(50)


def fill_claim(admin: Rest, index: int, node: str, _uid: str) -> None:
    """A bound pod holding an allocated claim that makes the node half full (the docstring)."""
    count, cores, mib = _fill_shape(index)
    name = f"dra-fill-{node}"
    pod = pods.pod(name, {**pods.container("main"), "resources": {"claims": [{"name": "gpu"}]}})
    pod["spec"]["nodeName"] = node
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
    pod_uid = admin.post(pods.PODS, pod)["metadata"]["uid"]
    request: Obj = {"deviceClassName": DRIVER, "count": count}
    if cores < 100:
        request["capacity"] = {"requests": {CORES: str(cores), MEMORY: mebi(mib)}}
    claim = {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "finalizers": [FINALIZER]},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}},
    }
    admin.post(CLAIMS, claim)
    results = [
        {
            "request": "gpu",
            "driver": DRIVER,
            "pool": node,
            "device": device_name(g),
            "shareID": str(uuid.uuid4()),
            "consumedCapacity": {CORES: str(cores), MEMORY: mebi(mib)},
        }
        for g in range(count)
    ]
    selector = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    status = {
        "allocation": {
            "devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms": [selector]},
        },
        "reservedFor": [{"resource": "pods", "name": name, "uid": pod_uid}],
    }
    admin.merge_patch(f"{CLAIMS}/{name}/status", {"status": status})


def on_node(admin: Rest, index: int, node: str, uid: str) -> None:
    """Everything the DRA path needs on one node (for `fill.populate(also=...)`)."""
    publish_slice(admin, node, uid)
    fill_claim(admin, index, node, uid)


def share_template(admin: Rest, name: str, cores: int) -> None:
    """A ResourceClaimTemplate asking one device: a `cores` share with its proportional
    memory, or, at 100 cores and more, `cores // 100` whole GPUs (each device's default: all)."""
    request: Obj = {"deviceClassName": DRIVER}
    if cores < 100:
        memory = mebi(share_memory_mib(cores))
        request["capacity"] = {"requests": {CORES: str(cores), MEMORY: memory}}
    else:
        request["count"] = cores // 100
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}
    template = {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": spec},
    }
    admin.post(TEMPLATES, template)


def claim_pod(name: str, template: str, main: Obj, labels: dict[str, str] | None = None) -> Obj:
    """A pod whose container `main` (its CPU and memory asks kept) uses a claim from
    `template`."""
    container = {**main, "resources": {**main["resources"], "claims": [{"name": "gpu"}]}}
    limits = {
        k: v for k, v in container["resources"].get("limits", {}).items() if "vgpu.io" not in k
    }
    container["resources"]["limits"] = limits
    pod = pods.pod(name, container, labels=labels)
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    return pod


def wait_claims_made(admin: Rest, query: str, count: int, timeout: float) -> float:
    """Wait until the resource-claim controller has made the claim of each of `count` pods
    (listed by `query`); the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        items = admin.get(pods.PODS + query)["items"]
        made = sum(1 for p in items if p.get("status", {}).get("resourceClaimStatuses"))
        if made >= count:
            break
        time.sleep(0.5)
    return time.monotonic() - started


def release_claims(admin: Rest, prefix: str, timeout: float) -> bool:
    """Once their pods are gone: wait until the resource-claim controller has freed the claims
    named `prefix*` (generated: `<pod>-gpu-<suffix>`), then delete them, as the garbage
    collector would (their pod owns them; no garbage collector runs here). False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        mine = [c for c in admin.get(CLAIMS)["items"] if c["metadata"]["name"].startswith(prefix)]
        if not any(c.get("status", {}).get("allocation") for c in mine):
            for claim in mine:
                admin.request("DELETE", f"{CLAIMS}/{claim['metadata']['name']}")
            return True
        time.sleep(1)
    return False


def allocated_fill(admin: Rest) -> int:
    """How many fill claims are still allocated (the resource-claim controller keeps them)."""
    return sum(
        1
        for c in admin.get(CLAIMS)["items"]
        if c["metadata"]["name"].startswith("dra-fill-") and c.get("status", {}).get("allocation")
    )
