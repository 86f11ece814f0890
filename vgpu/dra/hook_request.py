"""What the CDI hook (`vgpu-core/hook/vgpu-cdi-hook.c`) sends the DRA driver before a container
of a claim is created, and the hook's entry in the claim's CDI spec. Pure.

Why a hook: a pod joining a shared claim that is already prepared gets no
`NodePrepareResources` (`vgpu.daemons.dra_driver.joiners`), so nothing made the runtime wait for
the driver's memory limit on its cgroup. A CDI spec's `containerEdits.hooks` entry
(cncf-tags/container-device-interface SPEC.md: `hookName`, an absolute `path`, `args` as
execv's argv, `timeout` in seconds) becomes an OCI hook of every container using the claim; a
`createRuntime` hook runs in the runtime namespace after the runtime environment is created and
before pivot_root, gets the container's state JSON on stdin, and a failing hook fails the
container's creation (OCI runtime spec, config.md "POSIX-platform Hooks"). The spec-level
`containerEdits` are applied once when any device of the spec is requested (SPEC.md), so a
container using several requests of a claim runs the hook once per claim.

A request is the claim's UID and a newline, then the OCI state (`id`, `pid`, `annotations`,
...). containerd puts the pod's UID, namespace and name into every container's annotations
(`io.kubernetes.cri.sandbox-uid`, `-namespace`, `-name`: containerd
`internal/cri/annotations/annotations.go`, `DefaultCRIAnnotations`). CRI-O sets none of those: it
copies the container's CRI labels into its annotations, and the kubelet labels every container
with its pod's UID, namespace and name (`io.kubernetes.pod.uid`, ...: Kubernetes
`pkg/kubelet/kuberuntime/labels.go`, `newContainerLabels`; CRI-O
`internal/factory/container/container.go`, `SpecAddAnnotations`, which writes the labels last,
after the pod's own annotations it carries over). A pod's annotations can thus reach its
containers' annotations (CRI-O carries the sandbox's over; containerd passes those its runtime
is configured to), so a tenant can write either key, but not over the runtime's own: where the
two keys name different pods the request is refused. Without either, the pod is found from the
container process's cgroup path (`pod_uid_in_cgroup`), which names the pod in both of the
kubelet's cgroup layouts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_REQUEST = 64 * 1024 + 128  # the hook's bound on the state plus the claim UID line
MAX_ANSWER = 4096  # the hook reads no more
OK = "ok"
HOOK_NAME = "vgpu-cdi-hook"
HOOK_TIMEOUT_S = 10  # the runtime's bound on the hook; the hook's own is shorter
HOOK_WAIT_MS = 8000  # the hook's bound on the driver's answer
SANDBOX_UID = "io.kubernetes.cri.sandbox-uid"
SANDBOX_NAMESPACE = "io.kubernetes.cri.sandbox-namespace"
SANDBOX_NAME = "io.kubernetes.cri.sandbox-name"
POD_UID_LABEL = "io.kubernetes.pod.uid"  # the kubelet's container labels, which CRI-O copies
POD_NAMESPACE_LABEL = "io.kubernetes.pod.namespace"
POD_NAME_LABEL = "io.kubernetes.pod.name"
_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_CLAIM_UID = re.compile(r"[0-9a-f-]{1,64}")
# the pod's cgroup in the cgroupfs layout (`pod<uid>`) or the systemd one (`pod<uid with _>.slice`)
_POD_IN_CGROUP = re.compile(r"/(?:kubepods-(?:[a-z]+-)?)?pod([0-9a-f_-]{36})(?:\.slice)?(?:/|$)")


class BadRequest(ValueError):
    """The request cannot be read; the message says what is wrong, for the hook's stderr."""


@dataclass(frozen=True, slots=True)
class HookRequest:
    """A container about to be created with a claim: the claim's UID and its pod, if named."""

    claim_uid: str
    pod_uid: str | None
    pod: str  # namespace/name as the runtime named it, for messages ("" if not)
    pid: int | None  # the container's process, for the cgroup fallback


def parse_request(data: bytes) -> HookRequest:
    """The request the hook sent; raises BadRequest naming the field at fault."""
    if len(data) > MAX_REQUEST:
        raise BadRequest(f"request of {len(data)} bytes is over the bound of {MAX_REQUEST}")
    head, sep, body = data.partition(b"\n")
    claim_uid = head.decode("ascii", "replace")
    if not sep or not _CLAIM_UID.fullmatch(claim_uid):
        raise BadRequest("the request does not start with a claim UID line")
    try:
        state = json.loads(body)
    except (ValueError, RecursionError) as e:
        raise BadRequest(f"the container state is not JSON: {e}") from None
    if not isinstance(state, Mapping):
        raise BadRequest("the container state is not a JSON object")
    annotations = state.get("annotations")
    notes: Mapping[str, Any] = annotations if isinstance(annotations, Mapping) else {}
    pid = state.get("pid")
    if pid is not None and (type(pid) is not int or pid <= 0):
        raise BadRequest(f"the container state's pid is not a process ID: {pid!r:.80}")
    return HookRequest(claim_uid, _pod_uid(notes), _pod_name(notes), pid)


def _pod_uid(notes: Mapping[str, Any]) -> str | None:
    """The pod UID the runtime's annotations name (module doc: containerd's or CRI-O's key)."""
    named = {}
    for key in (SANDBOX_UID, POD_UID_LABEL):
        uid = notes.get(key)
        if uid is not None and (not isinstance(uid, str) or not _UID.fullmatch(uid)):
            raise BadRequest(f"annotation {key} is not a pod UID: {uid!r:.80}")
        if uid is not None:
            named[key] = uid
    if len(set(named.values())) > 1:
        raise BadRequest(
            f"annotations {SANDBOX_UID} and {POD_UID_LABEL} name different pods "
            f"({named[SANDBOX_UID]}, {named[POD_UID_LABEL]}); one was not the runtime's"
        )
    return next(iter(named.values()), None)


def _pod_name(notes: Mapping[str, Any]) -> str:
    """namespace/name as the runtime's annotations name the pod, for messages ("" if not)."""
    for keys in ((SANDBOX_NAMESPACE, SANDBOX_NAME), (POD_NAMESPACE_LABEL, POD_NAME_LABEL)):
        names = [notes.get(k) for k in keys]
        if any(isinstance(n, str) for n in names):
            return "/".join(n for n in names if isinstance(n, str))[:256]
    return ""


def pod_uid_in_cgroup(proc_cgroup: str) -> str | None:
    """The pod UID a process's cgroup path names (`/proc/<pid>/cgroup`, cgroup v2's `0::` line),
    in the cgroupfs or the systemd layout; None if it names none."""
    for line in proc_cgroup.splitlines():
        if not line.startswith("0::"):
            continue
        found = _POD_IN_CGROUP.search(line[3:])
        if found:
            uid = found.group(1).replace("_", "-")
            return uid if _UID.fullmatch(uid) else None
    return None


def hook_edit(program: str, socket: str, claim_uid: str) -> dict[str, Any]:
    """The CDI `createRuntime` hook entry that makes the runtime ask the driver (module doc)."""
    return {
        "hookName": "createRuntime",
        "path": program,
        "args": [HOOK_NAME, socket, claim_uid, str(HOOK_WAIT_MS)],
        "timeout": HOOK_TIMEOUT_S,
    }
