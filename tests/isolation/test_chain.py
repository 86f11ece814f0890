"""The whole chain without a GPU: from the extender's signed assignment to what a program sees.

1. The extender's side: the pod is bound with the binding annotations the extender writes
   (`vgpu.api.assignment.binding_annotations`, the real HMAC signing; tests/node/agent_harness).
2. The node agent, started in mode vgpu-core with the library installed as at its start
   (`install_vgpu_core`), answers the stand-in kubelet's Allocate calls over the device-plugin
   gRPC socket: cores, then memory, as the kubelet makes one call per resource.
3. The answers are applied the kubelet's way (`run_options`, below) and the container runs in
   the bubblewrap sandbox over the stand-in driver, whose GPUs are the agent's own inventory.

The pod's own `env` is a list the kubelet appends after the device plugins' variables
(k8s.io/kubernetes pkg/kubelet/kubelet_pods.go, `GenerateRunContainerOptions`:
`opts.Envs = append(opts.Envs, envs...)` after `GetResources` filled `opts` from the device
manager), and the runtime keeps the last value of a repeated name (containerd's `WithEnv`), so the
pod wins every variable it sets. Between device plugin answers the device manager keeps the first
value of a variable or container path it has seen (pkg/kubelet/cm/devicemanager/pod_devices.go,
`deviceRunContainerOptions`). The grant must hold anyway: it comes from the read-only limits file.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.isolation.conftest import MIB, Build, Cluster
from tests.isolation.sandbox import Container
from tests.isolation.standins import StandinGpu
from tests.isolation.test_memory_grant import codes
from tests.node.agent_harness import CORES, MEMORY, NODE, Box, make_box
from vgpu.adapters.container_dirs import ContainerDirs
from vgpu.adapters.fakegpu import FakeGpuBackend
from vgpu.adapters.vgpu_core_install import install_vgpu_core
from vgpu.node.grants import ContainerGrant, GrantMode, GrantSettings, Mount

NVML = ["python3", "-m", "tests.isolation.programs.nvml_memory"]
POD_ENVS: dict[str, list[tuple[str, str]]] = {
    "no-pod-env": [],
    "pod-overrides": [
        ("LD_PRELOAD", ""),
        ("CUDA_DEVICE_MEMORY_LIMIT_0", "4g"),
        ("CUDA_DEVICE_SM_LIMIT", "100"),
        ("VGPU_CORES", "100"),
        ("VGPU_MEMORY_LIMIT_MIB", "15360"),
        ("VGPU_MEMORY_LIMIT_BYTES", str(15360 * MIB)),
        ("VGPU_MODE", "plain"),
    ],
}


def run_options(responses: Sequence[Any], pod_env: Sequence[tuple[str, str]]) -> Container:
    """What the runtime gets from the kubelet for a container with these Allocate answers."""
    envs: dict[str, str] = {}
    mounts: dict[str, Mount] = {}
    for response in responses:
        (answer,) = response.container_responses
        for key, value in answer.envs.items():
            envs.setdefault(key, value)  # deviceRunContainerOptions: the first answer's value
        for m in answer.mounts:
            mounts.setdefault(m.container_path, Mount(m.container_path, m.host_path, m.read_only))
    ordered = [*envs.items(), *pod_env]  # GenerateRunContainerOptions: the pod's env after
    return Container(ContainerGrant(envs=dict(ordered), mounts=tuple(mounts.values())))


def standin_gpus(backend: FakeGpuBackend) -> list[StandinGpu]:
    """The stand-in driver's GPUs: the agent's inventory (one node, one set of GPUs)."""
    gpus = sorted(backend.inventory().gpus, key=lambda g: g.index)
    return [
        StandinGpu(g.uuid, g.memory_mib * MIB, f"00000000:{0x3B + g.index:02X}:00.0") for g in gpus
    ]


class Chain:
    """An agent in mode vgpu-core on the stand-in node, and the sandbox that runs its pods."""

    def __init__(self, box: Box, cluster: Cluster, backend: FakeGpuBackend) -> None:
        self.box, self.cluster = box, cluster
        self.uuid = cluster.uuids[0]  # the stand-in's CUDA device 0, which the pods are bound to
        core = install_vgpu_core(cluster.build.library, cluster.state, ContainerDirs(cluster.state))
        box.start_agent(backend=backend, grants=GrantSettings(GrantMode.VGPU_CORE, core=core))

    def admit(
        self, name: str, cores: int, blocks: int, pod_env: Sequence[tuple[str, str]]
    ) -> Container:
        """Bind a one-container pod to `uuid` as the extender does; admit it as the kubelet does."""
        where = self.box.gpus.index(self.uuid)
        self.box.place(name, [("main", cores, blocks)], {"main": [(where, cores)]})
        _, by_cores = self.box.kubelet.allocate(CORES, cores)
        responses = [by_cores]
        if blocks:
            responses.append(self.box.kubelet.allocate(MEMORY, blocks)[1])
        return run_options(responses, pod_env)

    def run(self, container: Container, command: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return self.cluster.sandbox.run(container, command)


def _chain(build: Build, tmp_path: Path) -> Iterator[Chain]:
    backend = FakeGpuBackend.from_spec("2xT4", seed=NODE)
    cluster = Cluster(build, standin_gpus(backend), tmp_path)
    for box in make_box():
        yield Chain(box, cluster, backend)


@pytest.fixture
def chain(build: Build, tmp_path: Path) -> Iterator[Chain]:
    yield from _chain(build, tmp_path)


@pytest.fixture
def timing_chain(plain_build: Build, tmp_path: Path) -> Iterator[Chain]:
    yield from _chain(plain_build, tmp_path)


def environment(chain: Chain, container: Container) -> Mapping[str, str]:
    done = chain.run(container, ["env", "-0"])
    return dict(item.split("=", 1) for item in done.stdout.split("\0") if item)


@pytest.mark.parametrize("pod", sorted(POD_ENVS))
def test_the_assignment_reaches_the_program_as_the_grant_whatever_the_pod_env(
    chain: Chain, pod: str
) -> None:
    container = chain.admit("a", 30, 2, POD_ENVS[pod])  # 2 blocks of 1,024 MiB on a T4
    grant, uuid = 2048 * MIB, chain.uuid
    seen = environment(chain, container)
    for key, value in POD_ENVS[pod]:
        assert seen[key] == value, f"the pod's {key} did not win the environment"

    info = chain.run(container, [str(chain.cluster.build.cuload), "info"])
    devices = {
        f[2]: dict(zip(f[3::2], f[4::2], strict=False))
        for f in map(str.split, info.stdout.splitlines())
    }
    assert int(devices[uuid]["total"]) == int(devices[uuid]["info_total"]) == grant, info.stdout
    (other,) = set(devices) - {uuid}  # the node's other GPU is not the container's
    assert devices[other]["total_rc"] != "0", info.stdout

    nvml = chain.run(container, NVML)
    assert nvml.returncode == 0, nvml.stderr
    assert f"{uuid} total {grant}" in nvml.stdout.splitlines()

    alloc = [str(chain.cluster.build.cuload), "alloc", "0", "mem", str(512 * MIB), "5"]
    assert codes(chain.run(container, alloc).stdout) == [0, 0, 0, 0, 2]  # OUT_OF_MEMORY at 5
    assert codes(chain.run(container, ["env", "-i", *alloc]).stdout) == [0, 0, 0, 0, 2]


@pytest.mark.parametrize("pod", sorted(POD_ENVS))
def test_the_assigned_cores_share_is_held_whatever_the_pod_env(
    timing_chain: Chain, pod: str
) -> None:
    container = timing_chain.admit("a", 30, 0, POD_ENVS[pod])
    cuload = str(timing_chain.cluster.build.cuload)
    spin = timing_chain.run(
        container, ["nice", "-n", "5", cuload, "spin", "0", "3", "2000", "kernel"]
    )
    assert spin.returncode == 0, spin.stdout + spin.stderr
    window = int(spin.stdout.split()[-1])
    usage = timing_chain.cluster.node.usage().busy_ns
    busy = sum(ns for (gpu, _), ns in usage.items() if gpu == timing_chain.uuid)
    assert 100 * busy / window == pytest.approx(30, abs=5)
