"""Discover GPUs (NVML, or a fake spec) and run the device plugin against the stand-in kubelet.

Prints what discovery found (GPUs, labels, inventory annotation, per-process memory), registers
both resources with a stand-in kubelet in a temporary directory, makes one cores and one memory
allocation, then serves until SIGTERM/SIGINT (or for --seconds) and stops gracefully.

    python hack/gpu_check.py                 # real GPUs through NVML
    python hack/gpu_check.py --fake 2xT4     # no GPU needed
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.kubelet_standin.kubelet import FakeKubelet
from vgpu.adapters.fakegpu import FakeGpuBackend
from vgpu.adapters.gpu import GpuBackend, NvmlBackend
from vgpu.adapters.kubelet.device_plugin import PluginOptions
from vgpu.adapters.kubelet.node_plugins import HealthPump, NodeDevicePlugins
from vgpu.adapters.kubelet.registration import serve_until_signal
from vgpu.api.inventory import encode_inventory
from vgpu.node.allocation import DefaultAllocationPolicy
from vgpu.node.health import HealthPolicy, HealthTracker
from vgpu.node.inventory import build_inventory
from vgpu.node.labels import node_labels


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fake", help="fake GPU spec or YAML file instead of NVML")
    parser.add_argument(
        "--seconds", type=float, default=-1, help="stop after N s (default: on signal)"
    )
    parser.add_argument("--memory-unit-mib", type=int, default=256)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    backend: GpuBackend = FakeGpuBackend.from_spec(args.fake) if args.fake else NvmlBackend()
    inventory = backend.inventory()
    print(f"driver {inventory.driver_version}, CUDA {inventory.cuda_version}")
    for gpu in inventory.gpus:
        print(f"GPU {gpu.index}: {gpu}")
    print("labels:", json.dumps(node_labels(inventory), indent=2, sort_keys=True))
    print(
        "annotation:",
        encode_inventory(build_inventory(inventory, memory_unit_mib=args.memory_unit_mib)),
    )
    print("process usage:", backend.process_usage())
    print("gpu stats:", backend.gpu_stats())

    sockdir = Path(tempfile.mkdtemp(prefix="vgchk"))
    kubelet = FakeKubelet(sockdir)
    kubelet.start()
    options = PluginOptions(plugin_dir=sockdir, stop_grace_s=1.0)
    policy = DefaultAllocationPolicy(inventory.gpus, memory_unit_mib=args.memory_unit_mib)
    plugins = NodeDevicePlugins(
        inventory.gpus, policy, options, memory_unit_mib=args.memory_unit_mib
    )
    uuids = tuple(g.uuid for g in inventory.gpus)
    tracker = HealthTracker(uuids, HealthPolicy(), time.monotonic)
    pump = HealthPump(backend.wait_xid, tracker, plugins.set_unhealthy, wait_s=1.0)
    pump.start()
    threading.Thread(target=_exercise, args=(kubelet, plugins, args.seconds), daemon=True).start()
    try:
        serve_until_signal(plugins.manager)
    finally:
        pump.stop()
        kubelet.stop()
        backend.close()
        leftovers = [p.name for p in sockdir.iterdir() if p.is_socket()]
        print(f"stopped; sockets left: {leftovers}", flush=True)
        shutil.rmtree(sockdir, ignore_errors=True)
    return 0


def _exercise(kubelet: FakeKubelet, plugins: NodeDevicePlugins, seconds: float) -> None:
    names = plugins.names
    resources = (names.cores, names.memory)
    ok = kubelet.wait_for(lambda: all(kubelet.devices(r) for r in resources), timeout=10)
    for resource in resources:
        print(f"registered {resource}: {len(kubelet.devices(resource))} devices", flush=True)
    if ok and kubelet.devices(names.cores):
        for resource, size in ((names.cores, 50), (names.memory, 4)):
            _ids, response = kubelet.allocate(resource, size)
            print(f"allocated {resource} x{size}: {dict(response.container_responses[0].envs)}")
    print("ready", flush=True)
    if seconds >= 0:
        time.sleep(seconds)
        os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    sys.exit(main())
