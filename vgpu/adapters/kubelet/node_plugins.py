"""Wiring for one node: the cores and memory plugins over the node's GPUs, fed by a health pump.

`NodeDevicePlugins` builds the two `ResourcePlugin`s (`<domain>/cores`, `<domain>/memory`) and
republishes their device lists when the set of unhealthy GPUs changes. `HealthPump` is the
loop that waits for XID events from a GPU backend, runs them through the pure
`HealthTracker` and publishes the result; a failing backend marks every GPU unhealthy and the
loop carries on, it never takes the daemon down.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from vgpu.adapters.kubelet.device_plugin import (
    DeviceBoard,
    PluginOptions,
    ResourcePlugin,
    to_proto_devices,
)
from vgpu.adapters.kubelet.registration import DevicePluginManager
from vgpu.core.errors import ConfigError
from vgpu.node.allocation import AllocationPolicy
from vgpu.node.devices import (
    DEFAULT_MEMORY_UNIT_MIB,
    DeviceEntry,
    ResourceNames,
    UnitKind,
    device_list,
)
from vgpu.node.health import HealthTracker
from vgpu.node.model import GpuInfo, XidEvent

log = logging.getLogger(__name__)
GRPC_MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # grpc-go's default receive limit, kept by the kubelet


class NodeDevicePlugins:
    def __init__(
        self,
        gpus: Sequence[GpuInfo],
        policy: AllocationPolicy,
        options: PluginOptions,
        *,
        names: ResourceNames | None = None,
        memory_unit_mib: int = DEFAULT_MEMORY_UNIT_MIB,
        report_numa: bool = False,
    ) -> None:
        self.names = names or ResourceNames()
        self._gpus = tuple(gpus)
        self._unit_mib = memory_unit_mib
        self._report_numa = report_numa
        self.boards = {kind: DeviceBoard(self._devices(kind, ())) for kind in UnitKind}
        plugins = [
            ResourcePlugin(self.names.cores, self.boards[UnitKind.CORES], policy, options),
            ResourcePlugin(self.names.memory, self.boards[UnitKind.MEMORY], policy, options),
        ]
        self.manager = DevicePluginManager(plugins, options)

    def _devices(self, kind: UnitKind, unhealthy: Iterable[str]) -> list[DeviceEntry]:
        """The devices of `kind`; without `report_numa` they carry no NUMA node, so the kubelet's
        topology manager never narrows what it offers (docs/handshake.md)."""
        devices = device_list(self._gpus, kind, unhealthy=unhealthy, memory_unit_mib=self._unit_mib)
        if self._report_numa:
            return devices
        return [replace(d, numa_node=None) for d in devices]

    def check_message_size(self) -> None:
        """Refuse a device list the kubelet cannot read: ListAndWatch is one gRPC message and the
        kubelet's client keeps gRPC's default 4 MiB receive limit."""
        for kind, board in self.boards.items():
            size = to_proto_devices(board.snapshot()[1]).ByteSize()
            if size > GRPC_MAX_MESSAGE_BYTES:
                raise ConfigError(
                    f"--memory-unit-mib {self._unit_mib}: the {kind.name.lower()} device list "
                    f"is {size / 2**20:.1f} MiB, beyond the 4 MiB gRPC message limit of the "
                    "kubelet's ListAndWatch; use a larger unit (e.g. 256)"
                )

    def republish(self) -> None:
        """Send every resource's device list again. The kubelet writes its device checkpoint
        on each ListAndWatch update (pkg/kubelet/cm/devicemanager/manager.go,
        `genericDeviceUpdateCallback`), dropping the devices of pods it has freed since."""
        for board in self.boards.values():
            board.republish()

    def set_unhealthy(self, uuids: Iterable[str]) -> bool:
        """Publish new device lists; True when anything changed (streams were woken)."""
        bad = frozenset(uuids)
        changed = False
        for kind, board in self.boards.items():
            changed |= board.publish(self._devices(kind, bad))
        return changed


class HealthPump:
    """Background loop: backend XID events → HealthTracker → `publish(unhealthy uuids)`."""

    def __init__(
        self,
        wait_events: Callable[[float], Sequence[XidEvent]],
        tracker: HealthTracker,
        publish: Callable[[frozenset[str]], object],
        *,
        wait_s: float = 5.0,
    ) -> None:
        self._wait_events = wait_events
        self._tracker = tracker
        self._publish = publish
        self._wait_s = wait_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: frozenset[str] = frozenset()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="vgpu-health", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._wait_s + 5.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()

    def step(self) -> None:
        """One wait for events plus publishing; also evaluates recovery of quiet GPUs."""
        try:
            self._tracker.observe(self._wait_events(self._wait_s))
        except Exception as e:  # any backend failure: all GPUs unhealthy, keep running
            log.error("GPU backend failed, marking all GPUs unhealthy: %s", e)
            self._tracker.backend_failed(str(e))
            self._stop.wait(min(self._wait_s, 1.0))
        unhealthy = self._tracker.unhealthy()
        if unhealthy != self._last:
            log.warning("unhealthy GPUs now: %s", sorted(unhealthy) or "none")
            self._last = unhealthy
            self._publish(unhealthy)
