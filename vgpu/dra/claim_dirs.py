"""The DRA driver's enforcement directories: one per prepared claim request, collected at unprepare.

In modes vgpu-core and hami a claim request's CDI edits mount a directory of its own (vgpu-core:
`limits/` read-only at `/run/vgpu/`, `shared/` read-write at `/run/vgpu-shared/`; hami: the
writable cache), created by the same `ContainerDirs` the node agent uses
(`vgpu.adapters.container_dirs.claim_dirs`), under `<state dir>/dra/` so a driver never removes
a node agent's. Every container that uses the
request mounts the same directory, so the claim's share is held across all of them together,
as one container's processes share a device-plugin grant.

The directories are bounded per node, per namespace and per pod with the device plugin's rule
(`vgpu.node.container_dirs.over_bound`, the same `--max-container-dirs-per-*` flags): each
request's directory records as its owner the claim's namespace, the first pod the claim is
reserved for (the kubelet prepares a claim only for a pod in its `status.reservedFor`, so there
is one) and the request's name (`vgpu.dra.prepare.claim_owner`). A pod whose claims ask for more directories than
the per-pod bound, or a namespace past its own, is refused at prepare while other namespaces are
still prepared: one tenant cannot take every directory of a node through claims either.

The kubelet tells a DRA driver when a claim is done (`NodeUnprepareResources`), so collection is
exact: a directory is removed as soon as no prepared claim in the checkpoint names it. That also
removes what a refused or failed preparation left behind and, at start, what a crash between
creating a directory and checkpointing its claim did. The caller holds the driver's lock, so no
preparation is between those two steps while it collects.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from vgpu.dra.prepare import PreparedClaim
from vgpu.node.container_dirs import CONTAINERS, ContainerDirMaker

log = logging.getLogger(__name__)
DRA_SUBDIR = "dra"
_ID = re.compile("/" + CONTAINERS + r"/([0-9a-f]{32})/")


def dir_ids(claim: PreparedClaim) -> frozenset[str]:
    """The directory ids a prepared claim's CDI mounts name (their host paths)."""
    ids = set()
    for device in claim.cdi_spec.get("devices") or ():
        for mount in (device.get("containerEdits") or {}).get("mounts") or ():
            ids.update(_ID.findall(str(mount.get("hostPath") or "") + "/"))
    return frozenset(ids)


def collect(dirs: ContainerDirMaker, prepared: Iterable[PreparedClaim]) -> list[str]:
    """Remove the directories no prepared claim names; the removed ids (never raises)."""
    try:
        named = frozenset().union(*(dir_ids(c) for c in prepared))
        return dirs.collect(named)
    except OSError as e:
        log.warning("cannot collect claim directories under %s: %s", dirs.root, e)
        return []
