"""Fixtures: a short socket directory, a stand-in kubelet and the node's device plugins."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kubelet_standin.kubelet import FakeKubelet
from vgpu.adapters.fakegpu import parse_spec
from vgpu.adapters.kubelet.device_plugin import PluginOptions
from vgpu.adapters.kubelet.node_plugins import NodeDevicePlugins
from vgpu.node.allocation import DefaultAllocationPolicy
from vgpu.node.model import GpuInventory

CORES, MEMORY = "vgpu.io/cores", "vgpu.io/memory"
UNIT_MIB = 1024  # T4: 15 memory devices per GPU


@pytest.fixture
def sockdir() -> Iterator[Path]:
    # Unix socket paths must stay under 108 bytes; pytest's tmp_path can be longer.
    path = Path(tempfile.mkdtemp(prefix="vg"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@dataclass
class Node:
    kubelet: FakeKubelet
    plugins: NodeDevicePlugins
    inventory: GpuInventory
    options: PluginOptions


def start_plugins(inventory: GpuInventory, options: PluginOptions) -> NodeDevicePlugins:
    policy = DefaultAllocationPolicy(inventory.gpus, memory_unit_mib=UNIT_MIB)
    plugins = NodeDevicePlugins(
        inventory.gpus, policy, options, memory_unit_mib=UNIT_MIB, report_numa=True
    )
    plugins.manager.start()
    return plugins


@pytest.fixture
def node(sockdir: Path) -> Iterator[Node]:
    kubelet = FakeKubelet(sockdir)
    kubelet.start()
    inventory = parse_spec("2xT4", numa_nodes=2)
    options = PluginOptions(plugin_dir=sockdir, register_timeout_s=2.0, stop_grace_s=0.2)
    plugins = start_plugins(inventory, options)
    yield Node(kubelet, plugins, inventory, options)
    plugins.manager.stop(0.2)
    kubelet.stop()
