"""Whether the node's container runtime lets the CDI device list hold, judged at the agent's start.

The agent names each container's GPUs as CDI devices (`vgpu.node.device_list`). That holds
against a tenant only when (docs/isolation.md, "Runtime settings"):

- a CDI spec names every GPU of the node as `<kind>=<UUID>`: otherwise the runtime refuses to
  start the container ("unresolvable CDI devices");
- the NVIDIA runtime, where installed, ignores `NVIDIA_VISIBLE_DEVICES` in unprivileged containers
  (`accept-nvidia-visible-devices-envvar-when-unprivileged = false`; NVIDIA's default is true):
  otherwise an image's `NVIDIA_VISIBLE_DEVICES=all` adds every GPU next to the CDI ones.

The agent can read the spec directories and the toolkit's config.toml only where they are
mounted into its pod (the chart mounts them read-only); what it cannot read it reports as not
verified, never as fine. Whether containerd or CRI-O has CDI on is not visible from a pod: the
docs say how to check it. Pure: the adapters read the files (`vgpu.adapters.runtime_settings`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vgpu.node.device_list import DeviceList, DeviceListStrategy

ENVVAR_WHEN_UNPRIVILEGED = "accept-nvidia-visible-devices-envvar-when-unprivileged"
DEFAULT_CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))  # the runtimes' defaults
DEFAULT_TOOLKIT_CONFIG = Path("/etc/nvidia-container-runtime/config.toml")


def runtime_problems(
    uuids: Sequence[str],
    devices: DeviceList,
    cdi_names: frozenset[str] | None,
    toolkit: Mapping[str, Any] | None,
) -> list[str]:
    """What keeps the node's GPUs from being given by CDI alone; empty when all is verified.

    `cdi_names`: the fully qualified device names of every readable spec (None: no spec
    directory could be read); `toolkit`: the NVIDIA runtime's parsed config.toml (None: not
    readable)."""
    if devices.strategy is DeviceListStrategy.ENVVAR:
        return [
            "--device-list-strategy envvar: GPUs are named in NVIDIA_VISIBLE_DEVICES, which a pod "
            "or its image can set to every GPU of the node; use cdi where the runtime has CDI"
        ]
    problems = []
    if cdi_names is None:
        problems.append(
            "not verified: no CDI spec directory is readable here, so it is unknown whether "
            f"{devices.cdi_kind}=<UUID> resolves; check `nvidia-ctk cdi list` on the node"
        )
    else:
        missing = [u for u in uuids if f"{devices.cdi_kind}={u}" not in cdi_names]
        if missing:
            problems.append(
                f"no CDI spec names {', '.join(f'{devices.cdi_kind}={u}' for u in missing)}: "
                "containers given these GPUs will not start; generate the spec "
                "(nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml)"
            )
    if toolkit is None:
        problems.append(
            f"not verified: the NVIDIA runtime's config.toml is not readable here; if the runtime "
            f"is installed, set {ENVVAR_WHEN_UNPRIVILEGED} = false in it"
        )
    elif toolkit.get(ENVVAR_WHEN_UNPRIVILEGED, True) is not False:
        problems.append(
            f"the NVIDIA runtime honours NVIDIA_VISIBLE_DEVICES in unprivileged containers "
            f"({ENVVAR_WHEN_UNPRIVILEGED} is not false; NVIDIA's default is true): an image "
            "that sets it to all gets every GPU of the node; set it to false"
        )
    return problems
