"""How a container's GPUs are named to the container runtime: CDI devices, or the variable.

The default is CDI (the Container Device Interface): the Allocate answer's `cdi_devices` (and a
prepared DRA claim's CDI ids) name each GPU as `<kind>=<UUID>`, by default `nvidia.com/gpu=<UUID>`,
the names the NVIDIA Container Toolkit's generated spec gives each GPU (`nvidia-ctk cdi generate`,
or its `nvidia-cdi-refresh` service; the GPU Operator with CDI on). The runtime (containerd or
CRI-O with CDI enabled) injects exactly those devices; nothing in the pod spec or the image can add
one, as long as the runtime ignores `NVIDIA_VISIBLE_DEVICES` in unprivileged containers
(docs/isolation.md, "Runtime settings").

`ENVVAR` is the opt-in for runtimes without CDI: the GPUs go in `NVIDIA_VISIBLE_DEVICES` and the
NVIDIA runtime selects them from it. It does not hold against a tenant: the runtime reads the
container's whole environment, image included, so an image's `NVIDIA_VISIBLE_DEVICES=all` (CUDA
base images set it) or a pod that sets it gets every GPU of the node; the admission policy sees
only the pod spec. Pure: names only.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_CDI_KIND = "nvidia.com/gpu"
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
# CDI: a kind is `vendor/class`; the vendor a domain-like name, the class a plain name.
_KIND = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*[A-Za-z0-9]/[A-Za-z0-9][A-Za-z0-9_.-]*")


class DeviceListStrategy(enum.Enum):
    """Which of the two ways the runtime learns a container's GPUs."""

    CDI = "cdi"
    ENVVAR = "envvar"


@dataclass(frozen=True, slots=True)
class DeviceList:
    """The strategy and, for CDI, the kind whose spec names each GPU by its UUID."""

    strategy: DeviceListStrategy = DeviceListStrategy.CDI
    cdi_kind: str = DEFAULT_CDI_KIND

    def __post_init__(self) -> None:
        if not _KIND.fullmatch(self.cdi_kind):
            raise ValueError(
                f"CDI kind {self.cdi_kind!r} is not vendor/class (e.g. {DEFAULT_CDI_KIND})"
            )

    def cdi_devices(self, uuids: Sequence[str]) -> tuple[str, ...]:
        """The fully qualified CDI names of `uuids` (none with the variable strategy)."""
        if self.strategy is not DeviceListStrategy.CDI:
            return ()
        return tuple(f"{self.cdi_kind}={uuid}" for uuid in uuids)

    def envs(self, uuids: Sequence[str]) -> dict[str, str]:
        """`NVIDIA_VISIBLE_DEVICES` with the variable strategy; nothing with CDI."""
        if self.strategy is not DeviceListStrategy.ENVVAR:
            return {}
        return {VISIBLE_DEVICES: ",".join(uuids)}
