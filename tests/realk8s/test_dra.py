"""DRA mode on the real components: the real kube-scheduler allocates vgpu.io claims from the
driver's ResourceSlice, the real kubelet prepares them through `vgpu dra-driver` and hands the
runtime the driver's CDI device; restarts of the driver and of the kubelet keep prepared claims.

One cluster for the module: node-a in device-plugin mode (node agent), node-d in DRA mode (its
kubelet plus the DRA driver), both at once, and kube-controller-manager running the
resource-claim controller alone: it makes claims from the pods' ResourceClaimTemplates, frees a
claim when its pod is gone and deletes the claims it generated.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.realk8s import binary, configs, manifests, pods
from tests.realk8s.cluster import REPO, NodeSpec, RealCluster
from tests.realk8s.grants import inspect_json
from tests.realk8s.processes import wait_until
from tests.realk8s.rest import ApiError, Identity, Obj, Rest

pytestmark = pytest.mark.realk8s

DRA_NODE = "node-d"
GPUS = "2xA100-SXM4-80GB"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
SLICE = f"/apis/resource.k8s.io/v1/resourceslices/{DRA_NODE}-vgpu-io"
SHOWN = ("dra/deviceclass", "dra/claim-policy", "rbac/dra-driver", "rbac/inspect")


def chart_objects(*sets: str, show: tuple[str, ...] = SHOWN) -> list[Obj]:
    """The chart's DRA objects (DeviceClass, driver RBAC, claim policy) as `helm template`
    renders them with `dra.enabled=true` and `sets`, so the cluster runs what ships."""
    sys.path.insert(0, str(REPO / "hack"))
    import chart

    values = [a for s in ("dra.enabled=true", *sets) for a in ("--set", s)]
    only = [a for t in show for a in ("--show-only", f"templates/{t}.yaml")]
    try:
        text = chart.run_helm(
            "template", "vgpu", str(chart.CHART), "-n", "vgpu-system",
            "--kube-version", binary.kube_version(), *values, *only,
        )  # fmt: skip
    except chart.ChartError as err:
        pytest.skip(f"the DRA tests render the chart: {err}")
    return [d for d in yaml.safe_load_all(text) if d]


def apply(api: Rest, obj: Obj) -> None:
    """Create `obj`; one that exists (vgpu-inspect, from daemonset/) takes the chart's version."""
    try:
        api.post(manifests.collection_path(obj), obj)
    except ApiError as err:
        if err.status != 409:
            raise
        api.put(manifests.object_path(obj), obj)


class DraNode:
    """node-d: fake CRI, real kubelet, `vgpu dra-driver` as the shipped service account."""

    def __init__(self, cluster: RealCluster, annotations: str = "containerd") -> None:
        self.cluster = cluster
        self.annotations = annotations  # whose the fake runtime gives its hooks: or "cri-o"
        self.dir = cluster.node_dir(DRA_NODE)
        self.kubelet_dir = self.dir / "kubelet"
        self.cdi = self.dir / "cdi"

    def start(self) -> None:
        c, binary = self.cluster, str(self.cluster.binary)
        for sub in ("kubelet/plugins", "kubelet/plugins_registry", "containers", "pod-logs",
                    "container-logs", "cdi", "kubelet/device-plugins", "kubelet/pod-resources"):  # fmt: skip
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        c.procs.start(
            f"cri-{DRA_NODE}",
            [binary, "fake-cri", f"--endpoint=unix://{self.dir / 'cri.sock'}",
             f"--record-dir={self.dir / 'containers'}", f"--cdi-dir={self.cdi}",
             f"--annotations={self.annotations}"],
        )  # fmt: skip
        wait_until(lambda: (self.dir / "cri.sock").exists(), 30, "fake CRI of node-d")
        c.start_kubelet(DRA_NODE)
        c.admin.merge_patch(
            f"/api/v1/nodes/{DRA_NODE}",
            {"metadata": {"labels": {"vgpu.io/mode": "dra", "vgpu.io/enabled": None}}},
        )
        self.start_driver()

    def start_driver(
        self, *flags: str, gpus: str = GPUS, env: dict[str, str] | None = None
    ) -> None:
        """Start the driver (again) with the tier's flags and `flags`, on fake GPUs `gpus`."""
        c = self.cluster
        c.procs.start(
            f"dra-{DRA_NODE}",
            [sys.executable, "-m", "vgpu", "dra-driver", f"--fake-gpus={gpus}",
             f"--plugins-dir={self.kubelet_dir / 'plugins'}",
             f"--registry-dir={self.kubelet_dir / 'plugins_registry'}",
             f"--cdi-dir={self.cdi}", f"--node-name={DRA_NODE}",
             f"--kubeconfig={c.kubeconfig('vgpu-dra-driver')}", "--slice-order=fullest", *flags],
            env=env,
        )  # fmt: skip
        wait_until(self.registered, 60, "the DRA driver registered", c._watching(f"dra-{DRA_NODE}"))

    def registrations(self) -> int:
        log = self.cluster.procs.log(f"dra-{DRA_NODE}").read_text()
        return log.count("registered with the kubelet")

    def registered(self) -> bool:
        """Registered since the driver's last start."""
        log = self.cluster.procs.log(f"dra-{DRA_NODE}").read_text()
        return "registered with the kubelet" in log.rsplit("=== start", 1)[-1]

    def stop_driver(self) -> None:
        self.cluster.procs.stop(f"dra-{DRA_NODE}")

    def restart_kubelet(self) -> None:
        """Restart node-d's kubelet and wait until it has found the driver again."""
        before = self.registrations()
        self.cluster.procs.stop(f"kubelet-{DRA_NODE}")
        self.cluster.start_kubelet(DRA_NODE)
        wait_until(lambda: self.registrations() > before, 60, "the driver registered again")

    def record(self, pod: str, container: str = "app") -> Obj:
        path = self.dir / "containers" / f"default_{pod}_{container}_0.json"
        wait_until(path.exists, 30, f"the runtime record of {pod}/{container}")
        record: Obj = json.loads(path.read_text())
        return record

    def cdi_env(self, cdi_id: str) -> dict[str, str]:
        """The variables the runtime applies for a CDI device of ours."""
        kind, name = cdi_id.split("=", 1)
        for spec_file in self.cdi.glob("*.json"):
            spec = json.loads(spec_file.read_text())
            for device in spec["devices"]:
                if spec["kind"] == kind and device["name"] == name:
                    env = device["containerEdits"]["env"]
                    return dict(e.split("=", 1) for e in env)
        raise AssertionError(f"no CDI spec for {cdi_id} in {self.cdi}")


@pytest.fixture(scope="module")
def dra(realk8s_binary: Path) -> Iterator[DraNode]:
    with dra_cluster(realk8s_binary) as node:
        yield node


@contextmanager
def dra_cluster(program: Path, annotations: str = "containerd") -> Iterator[DraNode]:
    """node-a (device plugin) and node-d (DRA driver) with the scheduler, the extender and the
    controllers DRA needs; node-d's fake runtime gives its hooks `annotations`' annotations."""
    root = Path(tempfile.mkdtemp(prefix="vk8s-dra-"))
    nodes = [NodeSpec("node-a", GPUS), NodeSpec(DRA_NODE, GPUS)]
    cluster = RealCluster(root, program, nodes)
    node = DraNode(cluster, annotations)
    try:
        cluster.up(api_only=True)  # certificates for both nodes; then node-a as `up` would
        cluster.start_scheduler()
        cluster.start_node("node-a")
        cluster.start_extender("extender-0", None, "--gang-timeout=15")
        cluster.wait_node_gpus("node-a")
        for obj in chart_objects():
            apply(cluster.admin, obj)
        cluster.tokens["vgpu-dra-driver"] = token = _token(cluster)
        _kubeconfig(cluster, token)
        node.start()
        _start_controller_manager(cluster)
        yield node
    finally:
        cluster.down()
        if os.environ.get("VGPU_REALK8S_KEEP") != "1":
            shutil.rmtree(root, ignore_errors=True)


def _start_controller_manager(cluster: RealCluster) -> None:
    """kube-controller-manager as system:kube-controller-manager, running only the
    resource-claim controller, under its own service account as a kubeadm cluster does."""
    kubeconfig = configs.write_kubeconfig(
        cluster.kubeconfig("kube-controller-manager"),
        cluster.server,
        cluster.pki / "ca.crt",
        Identity(
            "system:kube-controller-manager",
            str(cluster.pki / "controller-manager.crt"),
            str(cluster.pki / "controller-manager.key"),
        ),
    )
    cluster.procs.start(
        "kube-controller-manager",
        [str(cluster.binary), "kube-controller-manager", f"--kubeconfig={kubeconfig}",
         "--controllers=resourceclaim-controller", "--use-service-account-credentials",
         "--leader-elect=false", "--secure-port=0", "--v=2"],
    )  # fmt: skip
    log = cluster.procs.log("kube-controller-manager")
    wait_until(
        lambda: "Starting resource claim controller" in log.read_text(),
        90,
        "kube-controller-manager to start the resource-claim controller",
        cluster._watching("kube-controller-manager"),
    )


def _token(cluster: RealCluster) -> str:
    return manifests.service_account_token(cluster.admin, "vgpu-system", "vgpu-dra-driver")


def _kubeconfig(cluster: RealCluster, token: str) -> None:
    configs.write_kubeconfig(
        cluster.kubeconfig("vgpu-dra-driver"),
        cluster.server,
        cluster.pki / "ca.crt",
        Identity("vgpu-dra-driver", token=token),
    )


def claim(name: str, cores: str | None = None, memory: str | None = None, **extra: Any) -> Obj:
    exactly: Obj = {"deviceClassName": "vgpu.io", **extra}
    if cores is not None:
        exactly["capacity"] = {"requests": {"cores": cores, "memory": memory}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def claim_pod(name: str, claim_name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "vgpu-scheduler",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
            "containers": [
                {"name": "app", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }


def allocation(api: Rest, name: str) -> list[Obj]:
    obj = api.get(f"{CLAIMS}/{name}")
    results: list[Obj] = (
        obj.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
    )
    return results


def uuid_of(api: Rest, device: str) -> str:
    for d in api.get(SLICE)["spec"]["devices"]:
        if d["name"] == device:
            return str(d["attributes"]["uuid"]["string"])
    raise AssertionError(f"{device} not in the slice")


def release(api: Rest, pod: str, claim_name: str | None = None) -> None:
    """Delete the pod and its claim, and wait until both are gone: the resource-claim
    controller frees the claim's allocation (and deletes a claim it generated)."""
    for path in (f"{pods.PODS}/{pod}", f"{CLAIMS}/{claim_name}" if claim_name else None):
        if path is None:
            continue
        try:
            api.delete(path)
        except ApiError as err:
            if err.status != 404:
                raise
        wait_until(lambda: _gone(api, path), 60, f"{path} gone")  # noqa: B023


def _gone(api: Rest, path: str) -> bool:
    try:
        api.get(path)
    except ApiError as err:
        return err.status == 404
    return False


def run_claim(dra: DraNode, pod: str, name: str, **ask: Any) -> Obj:
    api = dra.cluster.admin
    api.post(CLAIMS, claim(name, **ask))
    api.post(pods.PODS, claim_pod(pod, name))
    return pods.wait_running(api, pod)


TEMPLATES = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates"
EXAMPLES = REPO / "examples" / "dra" / "claim-templates.yaml"


def template(name: str, cores: str, memory: str) -> Obj:
    spec = claim(name, cores=cores, memory=memory)["spec"]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": spec},
    }


def template_pod(name: str, template_name: str) -> Obj:
    pod = claim_pod(name, "")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template_name}]
    return pod


def generated_claim(api: Rest, pod: str) -> str:
    """The claim the resource-claim controller made for the pod's template."""
    (status,) = pods.get(api, pod)["status"]["resourceClaimStatuses"]
    return str(status["resourceClaimName"])


def granted_env(dra: DraNode, pod: str, container: str = "app") -> dict[str, str]:
    """The variables of the one vgpu CDI device the runtime was given for the container; its
    other CDI devices are the GPUs (`nvidia.com/gpu=<UUID>`), matching CUDA_VISIBLE_DEVICES."""
    names = [d["name"] for d in dra.record(pod, container)["cdiDevices"]]
    (ours,) = [n for n in names if n.startswith("vgpu.io/")]
    env = dra.cdi_env(ours)
    gpus = sorted(n.split("=", 1)[1] for n in names if n.startswith("nvidia.com/gpu="))
    assert gpus == sorted(env["CUDA_VISIBLE_DEVICES"].split(",")), names
    return env


def run_template(dra: DraNode, pod: str, template_name: str) -> tuple[str, list[Obj]]:
    """Run a pod from a template; its generated claim's name and allocation results."""
    api = dra.cluster.admin
    api.post(pods.PODS, template_pod(pod, template_name))
    pods.wait_running(api, pod)
    name = generated_claim(api, pod)
    return name, allocation(api, name)


def release_generated(dra: DraNode, pod: str, claim_name: str) -> None:
    """Delete the pod; the controller deletes its generated claim and the kubelet has the
    driver unprepare it (CDI spec removed)."""
    api = dra.cluster.admin
    spec = dra.cdi / f"vgpu.io-{api.get(f'{CLAIMS}/{claim_name}')['metadata']['uid']}.json"
    release(api, pod)
    wait_until(lambda: _gone(api, f"{CLAIMS}/{claim_name}"), 60, f"{claim_name} deleted")
    wait_until(lambda: not spec.exists(), 60, f"{claim_name} unprepared")


def test_example_templates_give_claims_that_are_allocated_and_prepared(dra: DraNode) -> None:
    # First in the module: node-d is empty, so the NVLink pair can have both GPUs.
    api = dra.cluster.admin
    for doc in yaml.safe_load_all(EXAMPLES.read_text()):
        if doc and doc["kind"] == "ResourceClaimTemplate":
            api.post(TEMPLATES, doc | {"metadata": doc["metadata"] | {"namespace": "default"}})
    expect = {  # template: (devices, cores each, VGPU_MEMORY_LIMIT_MIB of a share)
        "vgpu-share-30": (1, "30", "8192"),
        "vgpu-whole": (1, "100", None),
        "vgpu-nvlink-pair": (2, "100", None),
        "vgpu-a100-or-h100-half": (1, "50", "20480"),
    }
    for i, (name, (count, cores, memory)) in enumerate(expect.items()):
        pod = f"dra-example-{i}"
        claim_name, results = run_template(dra, pod, name)
        assert claim_name.startswith(f"{pod}-gpu"), claim_name
        assert len(results) == count and {r["pool"] for r in results} == {DRA_NODE}
        assert {r["consumedCapacity"]["cores"] for r in results} == {cores}, results
        env = granted_env(dra, pod)
        uuids = sorted(uuid_of(api, r["device"]) for r in results)
        assert sorted(env["CUDA_VISIBLE_DEVICES"].split(",")) == uuids
        if memory is not None:
            assert (env["VGPU_CORES"], env["VGPU_MEMORY_LIMIT_MIB"]) == (cores, memory)
        release_generated(dra, pod, claim_name)


def test_share_pods_from_templates_get_exactly_their_grant(dra: DraNode) -> None:
    # The device-plugin tier's share scenario (30, 50 and 70 cores at once), from templates.
    api = dra.cluster.admin
    asks = {"share-30": ("30", "4Gi"), "share-50": ("50", "8Gi"), "share-70": ("70", "2Gi")}
    for name, (cores, memory) in asks.items():
        api.post(TEMPLATES, template(f"tpl-{name}", cores, memory))
        api.post(pods.PODS, template_pod(f"dra-{name}", f"tpl-{name}"))
    used: dict[str, int] = {}
    for name, (cores, memory) in asks.items():
        pods.wait_running(api, f"dra-{name}")
        (result,) = allocation(api, generated_claim(api, f"dra-{name}"))
        used[result["device"]] = used.get(result["device"], 0) + int(cores)
        env = granted_env(dra, f"dra-{name}")
        assert env["CUDA_VISIBLE_DEVICES"] == uuid_of(api, result["device"])
        mib = str(int(memory.removesuffix("Gi")) * 1024)
        assert (env["VGPU_CORES"], env["VGPU_MEMORY_LIMIT_MIB"]) == (cores, mib)
    assert sum(used.values()) == 150 and max(used.values()) <= 100, used
    for name in asks:
        release_generated(dra, f"dra-{name}", generated_claim(api, f"dra-{name}"))


def test_init_container_and_app_container_get_the_claims_grant(dra: DraNode) -> None:
    # The device-plugin tier's init-container scenario: a vGPU init container that completes,
    # then the app container; both use the pod's claim, made from the shipped 30 % template.
    api = dra.cluster.admin
    pod = template_pod("dra-with-init", "vgpu-share-30")
    prep = {
        "name": "prep",
        "image": "busybox",
        "env": [{"name": "FAKE_CRI_EXIT_CODE", "value": "0"}],  # the init container completes
        "resources": {"claims": [{"name": "gpu"}]},
    }
    pod["spec"]["initContainers"] = [prep]
    api.post(pods.PODS, pod)
    pods.wait_running(api, "dra-with-init", timeout=90)
    claim_name = generated_claim(api, "dra-with-init")
    (result,) = allocation(api, claim_name)
    assert result["consumedCapacity"] == {"cores": "30", "memory": "8Gi"}
    for container in ("prep", "app"):
        env = granted_env(dra, "dra-with-init", container)
        assert env["CUDA_VISIBLE_DEVICES"] == uuid_of(api, result["device"])
        assert (env["VGPU_CORES"], env["VGPU_MEMORY_LIMIT_MIB"]) == ("30", "8192")
    release_generated(dra, "dra-with-init", claim_name)


def test_share_claim_is_allocated_prepared_and_given_the_grant(dra: DraNode) -> None:
    api = dra.cluster.admin
    bound = run_claim(dra, "dra-share", "share-30", cores="30", memory="8Gi")
    assert bound["spec"]["nodeName"] == DRA_NODE
    (result,) = allocation(api, "share-30")
    assert result["driver"] == "vgpu.io" and result["pool"] == DRA_NODE
    assert result["consumedCapacity"] == {"cores": "30", "memory": "8Gi"}
    uid = api.get(f"{CLAIMS}/share-30")["metadata"]["uid"]
    record = dra.record("dra-share")
    gpu = uuid_of(api, result["device"])
    # The claim's own device (mounts, limits) and the GPU itself, named in NVIDIA's CDI spec.
    names = [d["name"] for d in record["cdiDevices"]]
    assert names == [f"vgpu.io/claim={uid}-gpu", f"nvidia.com/gpu={gpu}"]
    env = dra.cdi_env(names[0])
    assert env["CUDA_VISIBLE_DEVICES"] == gpu
    assert (env["VGPU_CORES"], env["VGPU_MEMORY_LIMIT_MIB"]) == ("30", "8192")
    # The kubelet reads device health from the driver's health stream.
    (status,) = pods.get(api, "dra-share")["status"]["containerStatuses"]
    (health,) = status["allocatedResourcesStatus"]
    assert [r["health"] for r in health["resources"]] == ["Healthy"]


def test_a_first_available_subrequest_is_prepared_under_a_valid_cdi_name(dra: DraNode) -> None:
    """kube-scheduler's allocator records a `firstAvailable` subrequest as `<request>/<sub>`
    (resource.k8s.io/v1 `DeviceRequestAllocationResult.request`); the driver once put the '/'
    into the CDI device name, which the CDI library refuses (container-device-interface
    `pkg/parser/parser.go`, `ValidateDeviceName`), so the claim's container could not start
    under containerd or CRI-O. The first choice fits no GPU (its memory), the second is
    allocated."""
    api = dra.cluster.admin
    first_available = [
        {"name": name, "deviceClassName": "vgpu.io", "capacity": {"requests": ask}}
        for name, ask in (
            ("too-big", {"cores": "30", "memory": "100Gi"}),  # more than an 80 GB GPU
            ("small", {"cores": "30", "memory": "8Gi"}),
        )
    ]
    obj = claim("choice")
    obj["spec"]["devices"]["requests"] = [{"name": "gpu", "firstAvailable": first_available}]
    api.post(CLAIMS, obj)
    api.post(pods.PODS, claim_pod("dra-choice", "choice"))
    try:
        pods.wait_running(api, "dra-choice")
        (result,) = allocation(api, "choice")
        assert result["request"] == "gpu/small", result
        names = [d["name"] for d in dra.record("dra-choice")["cdiDevices"]]
        kind, name = names[0].split("=", 1)
        assert kind == "vgpu.io/claim" and CDI_NAME.fullmatch(name), names
        env = dra.cdi_env(names[0])
        assert (env["VGPU_CORES"], env["VGPU_MEMORY_LIMIT_MIB"]) == ("30", "8192")
    finally:
        release(api, "dra-choice", "choice")


# A CDI device name (container-device-interface, pkg/parser/parser.go, ValidateDeviceName).
CDI_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?")


def slice_order(api: Rest) -> list[str]:
    return [d["name"] for d in api.get(SLICE)["spec"]["devices"]]


def test_fullest_first_slice_makes_the_schedulers_first_fit_a_best_fit(dra: DraNode) -> None:
    api = dra.cluster.admin
    (first,) = allocation(api, "share-30")
    x = first["device"]
    y = "gpu-1" if x == "gpu-0" else "gpu-0"
    run_claim(dra, "dra-big-share", "share-80", cores="80", memory="1Gi")  # no room left on x
    assert allocation(api, "share-80")[0]["device"] == y
    wait_until(lambda: slice_order(api) == [y, x], 30, "the driver to list the fuller GPU first")
    # 20 cores fit both GPUs; first fit over the re-ordered slice takes the exact fit on y.
    run_claim(dra, "dra-fill", "share-20", cores="20", memory="1Gi")
    assert allocation(api, "share-20")[0]["device"] == y
    release(api, "dra-fill", "share-20")
    release(api, "dra-big-share", "share-80")


def test_whole_gpu_and_shares_fill_capacity_exactly(dra: DraNode) -> None:
    api = dra.cluster.admin
    run_claim(dra, "dra-whole", "whole")
    (whole,) = allocation(api, "whole")
    assert whole["consumedCapacity"]["cores"] == "100"
    # The other GPU still has room for 70 cores minus what the first test holds.
    used = {r["device"]: int(r["consumedCapacity"]["cores"]) for r in allocation(api, "share-30")}
    other = "gpu-1" if whole["device"] == "gpu-0" else "gpu-0"
    free = 100 - used.get(other, 0)
    run_claim(dra, "dra-rest", "rest", cores=str(free), memory="1Gi")
    assert allocation(api, "rest")[0]["device"] == other
    api.post(CLAIMS, claim("one-more", cores="1", memory="256Mi"))
    api.post(pods.PODS, claim_pod("dra-one-more", "one-more"))
    time.sleep(3)
    pod = pods.get(api, "dra-one-more")
    assert not pod["spec"].get("nodeName")
    message = pod["status"]["conditions"][0]["message"]
    assert "cannot allocate all claims" in message
    for pod_name, name in (
        ("dra-one-more", "one-more"),
        ("dra-rest", "rest"),
        ("dra-whole", "whole"),
    ):
        release(api, pod_name, name)


def test_claims_asking_more_than_a_gpu_are_refused_with_a_reason(dra: DraNode) -> None:
    api = dra.cluster.admin
    with pytest.raises(ApiError) as refused:
        api.post(CLAIMS, claim("cores-150", cores="150", memory="1Gi"))
    assert "spec.devices.requests[gpu].exactly.capacity.requests.cores: 150 is not" in str(
        refused.value
    )
    choice = claim("choice-150")
    choice["spec"]["devices"]["requests"] = [
        {
            "name": "gpu",
            "firstAvailable": [
                {"name": n, "deviceClassName": "vgpu.io", "capacity": {"requests": {"cores": c}}}
                for n, c in (("many", "150"), ("few", "30"))
            ],
        }
    ]
    with pytest.raises(ApiError) as refused:
        api.post(CLAIMS, choice)
    assert "requests[gpu].firstAvailable[many].capacity.requests.cores: 150" in str(refused.value)
    api.post(CLAIMS, claim("mem-100g", cores="10", memory="100Gi"))
    api.post(pods.PODS, claim_pod("dra-mem", "mem-100g"))
    wait_until(
        lambda: (
            "cannot allocate all claims"
            in str(pods.get(api, "dra-mem")["status"].get("conditions"))
        ),
        30,
        "the scheduler's reason on dra-mem",
    )
    release(api, "dra-mem", "mem-100g")


def test_driver_and_kubelet_restarts_keep_prepared_claims(dra: DraNode) -> None:
    api = dra.cluster.admin
    run_claim(dra, "dra-keep", "keep", cores="10", memory="1Gi")
    uid = api.get(f"{CLAIMS}/keep")["metadata"]["uid"]
    spec = dra.cdi / f"vgpu.io-{uid}.json"
    assert spec.exists()
    dra.stop_driver()
    spec.unlink()  # /var/run on tmpfs after a reboot, say
    dra.start_driver()
    assert spec.exists(), "the restarted driver rewrites CDI specs from its checkpoint"
    dra.restart_kubelet()
    pod = pods.get(api, "dra-keep")
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
    release(api, "dra-keep", "keep")
    wait_until(lambda: not spec.exists(), 60, "the kubelet to unprepare the claim")
    log = dra.cluster.procs.log(f"dra-{DRA_NODE}").read_text()
    assert "unprepared claim default/keep" in log


def test_sidecar_and_app_containers_share_the_pods_claim(dra: DraNode) -> None:
    # A sidecar (restartable init container): the fake runtime never ends a plain init container.
    api = dra.cluster.admin
    api.post(CLAIMS, claim("shared", cores="40", memory="2Gi"))
    pod = claim_pod("dra-init", "shared")
    uses = {"claims": [{"name": "gpu"}]}
    pod["spec"]["initContainers"] = [
        {"name": "warmup", "image": "busybox", "restartPolicy": "Always", "resources": uses}
    ]
    api.post(pods.PODS, pod)
    pods.wait_running(api, "dra-init")
    uid = api.get(f"{CLAIMS}/shared")["metadata"]["uid"]
    for container in ("warmup", "app"):
        record = dra.record("dra-init", container)
        names = [d["name"] for d in record["cdiDevices"]]
        assert names[0] == f"vgpu.io/claim={uid}-gpu", names
        assert [n.split("=")[0] for n in names[1:]] == ["nvidia.com/gpu"], names
    assert dra.cdi_env(f"vgpu.io/claim={uid}-gpu")["VGPU_CORES"] == "40"
    release(api, "dra-init", "shared")


def test_inspect_shows_both_modes_with_claims(dra: DraNode) -> None:
    api = dra.cluster.admin
    api.post(pods.PODS, pods.pod("plugin-20", pods.container("main", 20, 4)))
    pods.wait_running(api, "plugin-20")
    report = inspect_json(dra.cluster)
    nodes = {n["name"]: n for n in report["nodes"]}
    assert nodes[DRA_NODE]["mode"] == "dra" and "mode" not in nodes["node-a"]
    # share-30 (30 cores, 8 GiB) is the only claim left on node-d, on the GPU it was allocated.
    (result,) = allocation(api, "share-30")
    gpus = {f"gpu-{g['index']}": g for g in nodes[DRA_NODE]["gpus"]}
    (held,) = [h for g in gpus.values() for h in g["holders"]]
    assert held == {
        "pod": "default/dra-share",
        "container": "claim/share-30",
        "cores": 30,
        "memoryMiB": 8192,
        "admitted": held["admitted"],
    }
    assert held in gpus[result["device"]]["holders"]
    assert (gpus[result["device"]]["coresUsed"], gpus[result["device"]]["memoryUsedMiB"]) == (
        30,
        8192,
    )
    plugin = [h for g in nodes["node-a"]["gpus"] for h in g["holders"]]
    assert [(h["pod"], h["cores"], h["memoryMiB"]) for h in plugin] == [
        ("default/plugin-20", 20, 4 * 256)
    ]


def _gang(api: Rest, name: str, size: int, cores: str) -> list[str]:
    labels = {pods.GROUP_NAME: name, pods.GROUP_MIN: str(size)}
    names = [f"{name}-{i}" for i in range(size)]
    for member_name in names:
        api.post(CLAIMS, claim(f"{member_name}-gpu", cores=cores, memory="1Gi"))
        member = claim_pod(member_name, f"{member_name}-gpu")
        member["metadata"]["labels"] = labels
        api.post(pods.PODS, member)
    return names


def test_a_gang_of_claim_pods_that_fits_is_bound(dra: DraNode) -> None:
    # node-d holds share-30 (30 cores of one GPU): two 30-core members fit; the extender
    # leaves their nodes to the scheduler's DRA allocator (a device-plugin node exists).
    api = dra.cluster.admin
    names = _gang(api, "fits", 2, "30")
    try:
        wait_until(lambda: all(pods.node_of(api, n) for n in names), 60, "both members bound")
        assert {pods.node_of(api, n) for n in names} == {DRA_NODE}
        assert all(allocation(api, f"{n}-gpu") for n in names)
        log = dra.cluster.procs.log("extender-0").read_text()  # through the extender's gate
        assert all(f"claim member default/{n} reached bind" in log for n in names)
    finally:
        for n in names:
            release(api, n, f"{n}-gpu")


def test_a_gang_of_claim_pods_that_cannot_fit_binds_no_member_and_says_why(dra: DraNode) -> None:
    # 80 cores fit only the GPU share-30 leaves free: one member gets its claim allocated and
    # reaches binding, the other finds no devices; past the gang timeout (15 s here) both get
    # an Event saying why, and neither is bound.
    api = dra.cluster.admin
    names = _gang(api, "nofit", 2, "80")
    try:
        wait_until(lambda: all(_gang_event(api, n) for n in names), 90, "an Event on every member")
        message = _gang_event(api, names[0])
        assert "only 1 member(s) had their ResourceClaims allocated" in message, message
        assert all(not pods.node_of(api, n) for n in names)
        waiting = [n for n in names if not allocation(api, f"{n}-gpu")]
        assert len(waiting) == 1 and f"default/{waiting[0]} did not" in message
        condition = pods.get(api, waiting[0])["status"]["conditions"][0]["message"]
        assert "cannot allocate all claims" in condition
    finally:
        for n in names:
            release(api, n, f"{n}-gpu")


def _gang_event(api: Rest, pod: str) -> str:
    for event in pods.events_for(api, pod):
        if event.get("reason") == "VgpuGangIncomplete":
            return str(event.get("message", ""))
    return ""
