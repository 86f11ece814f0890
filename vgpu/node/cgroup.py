"""Which pod and container a host process belongs to, read from its `/proc/<pid>/cgroup` text.

NVML reports GPU memory per host PID; the kubelet knows pods and the runtime knows container IDs.
The link is the process's cgroup path, which the kubelet and the runtime lay out as:

| cgroup driver | path of a container's processes (below any prefix such as `/docker/<id>`) |
|---|---|
| cgroupfs | `/kubepods[/burstable\\|/besteffort]/pod<uid>/<container-id>` |
| systemd | `/kubepods.slice[/kubepods-<qos>.slice]/kubepods[-<qos>]-pod<uid_with_underscores>.slice/<runtime>-<container-id>.scope` with `<runtime>` `cri-containerd`, `crio`, `docker` |
| containerd, systemd-style path under cgroupfs | `.../kubepods-<qos>-pod<uid>.slice:cri-containerd:<container-id>` |

cgroup v1 lists one line per hierarchy (`12:memory:/path`), v2 a single `0::/path`; the path is
the same in each, so the first line that names a pod and a container wins. crun may put the
processes one level deeper (`.../crio-<id>.scope/container`); CRI-O's monitor (`crio-conmon-<id>`)
is not a container. Pure: text in, value out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# API-server UIDs, with `_` for `-` in systemd slices; static pods use a 32-hex config hash.
_UID = r"(?:[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32})"
_POD = re.compile(rf"pod(?P<uid>{_UID})(?![0-9a-f])")
_CONTAINER = re.compile(
    r"^(?:(?:cri-containerd|containerd|crio|docker|cri-dockerd)-)?(?P<id>[0-9a-f]{12,64})"
    r"(?:\.scope)?$"
)
_RUNTIMES = ("cri-containerd", "containerd", "crio", "docker", "cri-dockerd")


@dataclass(frozen=True, slots=True)
class CgroupOwner:
    """The pod UID (with dashes) and runtime container ID (bare hex) a process runs in."""

    pod_uid: str
    container_id: str


def parse_cgroup(text: str) -> CgroupOwner | None:
    """The pod and container of a process from its cgroup file, or None outside any pod."""
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) == 3:
            owner = parse_cgroup_path(parts[2])
            if owner is not None:
                return owner
    return None


def parse_cgroup_path(path: str) -> CgroupOwner | None:
    """The pod and container of one cgroup path, or None if it names no container of a pod."""
    path = path.strip().lower()
    pods = list(_POD.finditer(path))
    if not pods:
        return None
    pod = pods[-1]  # the innermost pod segment counts (kind nests a node's kubepods in a container)
    for segment in re.split(r"[/:]", path[pod.end() :]):
        if segment in _RUNTIMES or segment in ("", ".slice"):
            continue
        match = _CONTAINER.match(segment)
        if match is None:
            return None  # e.g. crio-conmon-<id>.scope, the pod slice itself
        return CgroupOwner(normalize_uid(pod["uid"]), match["id"])
    return None


def normalize_uid(uid: str) -> str:
    """Pod UIDs as the API server writes them: lower case, dashes (systemd slices use `_`)."""
    return uid.strip().lower().replace("_", "-")


def container_id(status_id: str) -> str:
    """The bare ID of a pod status `containerID` (`containerd://<id>`, `cri-o://<id>`, ...)."""
    return status_id.rsplit("://", 1)[-1].strip().lower()
