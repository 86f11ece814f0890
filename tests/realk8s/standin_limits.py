"""A node whose (stand-in) driver has per-cgroup memory limits, for the daemons of the real
cluster tier: the stand-in NVML (`tests/isolation/standin`), whose
`nvmlDeviceSetMemoryLimits_v1` writes a limit as the dmem controller keeps it (`dmem.max` of the
cgroup) into a fake cgroup v2 tree, and a fake GPU inventory naming the same GPUs with a driver
that has the limits. The tier's kubelets run no cgroups (`cgroupsPerQOS` off), so a test makes
a pod's cgroup directory itself, as the kubelet's `EnsureExists` would."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.isolation.standins import Node, StandinGpu, cached_build, gcc_available, gpu_uuid
from vgpu.node.driver_limits import dmem_region

DRIVER = "615.10.01"


@dataclass
class LimitedGpus:
    """The stand-in node, its fake cgroup tree and the inventory file the daemon is given."""

    standin: Node
    cgroupfs: Path
    inventory: Path

    @classmethod
    def make(cls, root: Path, node: str, model: str, memory: int) -> LimitedGpus:
        if not gcc_available():
            pytest.skip("the stand-in NVML needs gcc")
        gpus = [  # the fake inventory's PCI addresses, so both name the same dmem regions
            StandinGpu(gpu_uuid(node, i), memory, f"00000000:{0x10 + i:02X}:00.0") for i in range(2)
        ]
        cgroupfs = root / "cgroupfs"
        (cgroupfs / "kubepods").mkdir(parents=True)
        (cgroupfs / "cgroup.controllers").write_text("cpu io memory pids dmem\n")
        regions = [f"{dmem_region(g.pci)} {g.memory}" for g in gpus]
        (cgroupfs / "dmem.capacity").write_text("\n".join(regions) + "\n")
        standin = Node(cached_build(root / "build"), gpus, root / "node", cgroupfs)
        inventory = root / "gpus.yaml"
        listed = [{"model": model, "uuid": g.uuid} for g in gpus]
        inventory.write_text(yaml.safe_dump({"driverVersion": DRIVER, "gpus": listed}))
        return cls(standin, cgroupfs, inventory)

    @property
    def flags(self) -> tuple[str, ...]:
        return ("--driver-memory-limits=on", f"--cgroupfs={self.cgroupfs}")

    def env(self) -> dict[str, str]:
        return self.standin.env()

    def pod_cgroup(self, uid: str) -> Path:
        """Make the pod's cgroup (cgroupfs layout, no QoS level: any the daemons look in)."""
        path = self.cgroupfs / "kubepods" / f"pod{uid}"
        path.mkdir()
        return path

    def hard_limit(self, cgroup: Path, uuid: str) -> int:
        """The cgroup's hard limit on GPU `uuid` as the driver keeps it (its `dmem.max` line)."""
        (gpu,) = [g for g in self.standin.gpus if g.uuid == uuid]
        for line in (cgroup / "dmem.max").read_text().splitlines():
            region, value = line.split()
            if region == dmem_region(gpu.pci):
                return int(value)
        raise AssertionError(f"no limit for {uuid} in {cgroup / 'dmem.max'}")
