"""The driver memory backend in DRA mode: `NodePrepareResources` sets the driver's memory limit on
the cgroup of each pod the claim is reserved for, the sum of that pod's claims on each GPU, and
fails closed; the ResourceSlice says which backend holds each GPU's memory.

The driver runs in-process over real gRPC and the fake API server (`tests/dra/test_driver.py`);
NVML's setter is recorded; the cgroup v2 tree is a fake directory with the kubelet's layouts."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.dra.test_driver import NODE, Env, env, share
from tests.node.test_driver_prestart import RecordingLimits
from tests.waiting import holds_within, wait_until
from vgpu.adapters.fakegpu import FakeGpuBackend
from vgpu.daemons.dra_driver.driver import DraDriver
from vgpu.node.driver_limits import dmem_region
from vgpu.node.driver_mode import DriverLimits

__all__ = ["env"]  # the fixture, used by name
MIB = 1 << 20


class Functions(RecordingLimits):
    """The recorded setter as the driver's library with both functions."""

    available = True


@pytest.fixture
def cgroupfs(env: Env) -> Iterator[Path]:
    """A cgroup v2 tree with dmem listing the node's GPUs and the kubelet's pod cgroups root."""
    root = env.root / "cgroupfs"
    (root / "kubepods.slice").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu io memory pids dmem\n")
    gpus = env.backend.inventory().gpus
    lines = [f"{dmem_region(g.pci_bus_id)} {g.memory_mib * MIB}" for g in gpus]
    (root / "dmem.capacity").write_text("\n".join(lines) + "\n")
    yield root


def r615(env: Env) -> None:
    """The node's driver is one with per-cgroup memory limits."""
    inventory = FakeGpuBackend.from_spec("2xT4", seed=NODE).inventory()
    env.backend = FakeGpuBackend(replace(inventory, driver_version="615.10.01"))


def start(env: Env, cgroupfs: Path, nvml: Functions) -> DraDriver:
    """The driver with the limits on; its own pass of setting them again waits an hour (the
    tests call `reapply_limits` themselves)."""
    r615(env)
    return env.start(nvml=nvml, driver_limits=DriverLimits.ON, cgroupfs=cgroupfs, resync_s=3600)


def put_pod(env: Env, name: str, claims: list[str]) -> str:
    pod = env.api.store.put(
        {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "nodeName": NODE,
                "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims],
            },
        }
    )
    return str(pod["metadata"]["uid"])


def reserve(env: Env, claim: str, *pods: tuple[str, str]) -> None:
    obj = env.api.store.get("ResourceClaim", "default", claim)
    assert obj is not None
    obj["status"]["reservedFor"] = [
        {"resource": "pods", "name": name, "uid": uid} for name, uid in pods
    ]
    env.api.store.put(obj)


def pods_claim(env: Env, *results: dict[str, Any]) -> tuple[str, str]:
    """Claim `c1` with `results`, reserved for pod `p` that uses it alone: (claim, pod) UIDs."""
    claim = env.put_claim("c1", *results)
    uid = put_pod(env, "p", ["c1"])
    reserve(env, "c1", ("p", uid))
    return claim, uid


def pod_cgroup(cgroupfs: Path, uid: str) -> Path:
    """The pod's cgroup in the systemd layout (burstable), as the kubelet makes it."""
    path = (
        cgroupfs
        / "kubepods.slice/kubepods-burstable.slice"
        / f"kubepods-burstable-pod{uid.replace('-', '_')}.slice"
    )
    path.mkdir(parents=True)
    return path


def device_attributes(env: Env) -> list[dict[str, Any]]:
    obj = env.api.store.get("ResourceSlice", None, "node-a-vgpu-io")
    assert obj is not None
    return [d["attributes"] for d in obj["spec"]["devices"]]


def test_a_prepared_claim_limits_its_pods_to_all_their_claims_on_each_gpu(
    env: Env, cgroupfs: Path
) -> None:
    nvml = Functions()
    start(env, cgroupfs, nvml)
    c1 = env.put_claim("c1", share("gpu-0", "30", "2Gi"))
    env.put_claim(
        "c2", share("gpu-0", "20", "1Gi"), {**share("gpu-1", "10", "4Gi"), "request": "b"}
    )
    uid = put_pod(env, "p", ["c1", "c2"])
    reserve(env, "c1", ("p", uid))
    cgroup = pod_cgroup(cgroupfs, uid)
    assert env.prepare("c1", c1).error == ""
    gpu0, gpu1 = env.gpus
    assert sorted(nvml.calls) == sorted(
        [(gpu0, cgroup, 3072 * MIB, 0), (gpu1, cgroup, 4096 * MIB, 0)]
    )
    assert {a["memoryBackend"]["string"] for a in device_attributes(env)} == {"driver"}


def test_a_claim_none_of_whose_pods_has_a_cgroup_here_is_refused_and_not_prepared(
    env: Env, cgroupfs: Path
) -> None:
    nvml = Functions()
    start(env, cgroupfs, nvml)
    c1, uid = pods_claim(env, share("gpu-0", "30", "2Gi"))
    error = env.prepare("c1", c1).error
    assert "no pod of the claim (p) has a cgroup under" in error
    assert nvml.calls == [] and len(env.drivers[-1].checkpoint) == 0
    assert not (env.root / "cdi" / f"vgpu.io-{c1}.json").exists()
    pod_cgroup(cgroupfs, uid)  # the kubelet retries; the pod's cgroup is there now
    assert env.prepare("c1", c1).error == ""
    assert [call[2] for call in nvml.calls] == [2048 * MIB]


def test_the_periodic_pass_sets_a_prepared_claims_pod_limits_again(
    env: Env, cgroupfs: Path
) -> None:
    """The backstop of the joiners' watch (a broken watch, a failed set, limits lost): every
    pass sets the limits of each prepared claim's pods again; a pod gone from the node is no
    failure."""
    nvml = Functions()
    driver = start(env, cgroupfs, nvml)
    c1, first = pods_claim(env, share("gpu-0", "30", "2Gi"))
    first_cgroup = pod_cgroup(cgroupfs, first)
    assert env.prepare("c1", c1).error == ""
    second = put_pod(env, "q", ["c1"])
    reserve(env, "c1", ("p", first), ("q", second))
    second_cgroup = pod_cgroup(cgroupfs, second)
    wait_until(lambda: limited(nvml, second_cgroup), 5, "the joining pod's limit")
    first_cgroup.rmdir()  # the first pod ended
    nvml.calls.clear()
    assert driver.reapply_limits() == 1
    assert nvml.calls == [(env.gpus[0], second_cgroup, 2048 * MIB, 0)]


def test_a_limit_the_driver_refuses_fails_the_prepare_with_its_cause(
    env: Env, cgroupfs: Path
) -> None:
    start(env, cgroupfs, Functions(fail="NVML nvmlDeviceSetMemoryLimits_v1 failed: No permission"))
    c1, uid = pods_claim(env, share("gpu-1", "30", "2Gi"))
    pod_cgroup(cgroupfs, uid)
    error = env.prepare("c1", c1).error
    assert "No permission" in error and f"GPU {env.gpus[1]}" in error and "pod p" in error
    assert len(env.drivers[-1].checkpoint) == 0


def test_without_the_driver_limits_the_slice_names_the_mode_and_no_cgroup_is_needed(
    env: Env, cgroupfs: Path
) -> None:
    nvml = Functions()
    r615(env)
    env.start(nvml=nvml, driver_limits=DriverLimits.OFF, cgroupfs=cgroupfs)
    assert {a["memoryBackend"]["string"] for a in device_attributes(env)} == {"plain"}
    c1 = env.put_claim("c1", share("gpu-0", "30", "2Gi"))
    assert env.prepare("c1", c1).error == "" and nvml.calls == []


def test_auto_without_the_capability_falls_back_to_the_mode(env: Env, cgroupfs: Path) -> None:
    (cgroupfs / "kubepods.slice").rmdir()  # the driver sees only its own cgroup namespace
    r615(env)
    driver = env.start(nvml=Functions(), driver_limits=DriverLimits.AUTO, cgroupfs=cgroupfs)
    assert not driver.memory_choice.driver_limits
    assert "no kubepods cgroup" in driver.memory_choice.reason
    assert {a["memoryBackend"]["string"] for a in device_attributes(env)} == {"plain"}


def limited(nvml: Functions, cgroup: Path) -> list[tuple[Any, ...]]:
    return [call for call in nvml.calls if call[1] == cgroup]


def test_a_pod_that_joins_a_prepared_claim_is_limited_as_soon_as_its_cgroup_appears(
    env: Env, cgroupfs: Path
) -> None:
    """No prepare call comes for a second pod of a prepared claim; the scheduler reserves the
    claim for it before binding, and the kubelet makes its cgroup before its sandbox: the limit
    follows the cgroup at once, not the periodic pass (an hour here)."""
    nvml = Functions()
    start(env, cgroupfs, nvml)
    c1, first = pods_claim(env, share("gpu-0", "30", "2Gi"))
    pod_cgroup(cgroupfs, first)
    assert env.prepare("c1", c1).error == ""
    second = put_pod(env, "q", ["c1"])
    reserve(env, "c1", ("p", first), ("q", second))  # the scheduler, before it binds q
    second_cgroup = pod_cgroup(cgroupfs, second)  # the kubelet's EnsureExists
    wait_until(lambda: limited(nvml, second_cgroup), 5, "the joining pod's limit")
    assert limited(nvml, second_cgroup) == [(env.gpus[0], second_cgroup, 2048 * MIB, 0)]


def test_a_pod_reserved_on_a_claim_not_prepared_here_gets_no_limit_from_the_watch(
    env: Env, cgroupfs: Path
) -> None:
    """Only prepare limits the pods of a claim it has not prepared (and fails closed there)."""
    nvml = Functions()
    start(env, cgroupfs, nvml)
    _, uid = pods_claim(env, share("gpu-0", "30", "2Gi"))
    cgroup = pod_cgroup(cgroupfs, uid)
    assert not holds_within(lambda: limited(nvml, cgroup), 0.5)
