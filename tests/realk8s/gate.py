"""A one-device plugin that holds the kubelet's admission while it is stopped (SIGSTOP).

The kubelet admits the pods it is given one at a time (`HandlePodAdditions` in
pkg/kubelet/kubelet.go), and the device manager calls a plugin's GetPreferredAllocation and
Allocate without a deadline (`allocateContainerResources` and `endpoint.go` in
pkg/kubelet/cm/devicemanager). A pod asking this plugin's resource while the plugin's process is
stopped therefore holds every later pod of that node before admission, until the process is
continued: the window between a pod's binding and its admission, held open from outside.

Run as `python -m tests.realk8s.gate PLUGIN_DIR RESOURCE`; SIGTERM ends it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from vgpu.adapters.kubelet.device_plugin import DeviceBoard, PluginOptions, ResourcePlugin
from vgpu.adapters.kubelet.registration import DevicePluginManager, serve_until_signal
from vgpu.node.devices import DeviceEntry
from vgpu.node.grants import ContainerGrant, Refusal


class OpenGate:
    """Grants whatever the kubelet chose, with nothing in the container's environment."""

    def preferred(
        self, resource: str, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        rest = [d for d in available if d not in must_include]
        return [*must_include, *rest][:size]

    def allocate(
        self, resource: str, container_ids: Sequence[Sequence[str]]
    ) -> list[ContainerGrant] | Refusal:
        return [ContainerGrant() for _ in container_ids]


def main(argv: Sequence[str]) -> None:
    plugin_dir, resource = Path(argv[0]), argv[1]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    options = PluginOptions(plugin_dir=plugin_dir)
    board = DeviceBoard([DeviceEntry("gate-0", True, None)])
    plugin = ResourcePlugin(resource, board, OpenGate(), options)
    serve_until_signal(DevicePluginManager([plugin], options))


if __name__ == "__main__":
    main(sys.argv[1:])
