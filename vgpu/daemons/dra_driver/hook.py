"""The DRA driver's answer to the CDI hook: before a container of a claim is created, set the
driver's memory limit on its pod's cgroup, then answer "ok"; or answer the cause, which fails
the container's creation (fail closed).

This closes the window `vgpu.daemons.dra_driver.joiners` leaves open: a pod joining a prepared
shared claim gets no prepare call, and nothing made the runtime wait for its limit. The hook is
run by the runtime for every container of the claim (`vgpu.dra.hook_request`), after the pod's
cgroup exists (the kubelet makes it in `SyncPod` before the sandbox), and the runtime waits for
it. So the limit is set synchronously here, by the same code as at prepare and by the joiners
(`ClaimLimits.apply_pod`: the pod's claims summed per GPU); setting it again on every container
start also covers restarts and a driver reload that lost it.

The pod must be in the claim's `status.reservedFor` as the API server has it now: the kubelet
refuses a pod the claim is not reserved for, so anything else is a container that should not
have the claim. A claim holding part of a GPU is used by one pod at a time: while another of its
reserved pods has a cgroup here, the container is refused (`vgpu.dra.pod_limits`,
`sharing_refusal`: each pod's limit would be the whole claim). Only nodes whose memory backend is the driver's write the hook into their CDI
specs (`DraDriver`): elsewhere there is no limit to wait for, and a hook would only add a way
for containers to fail.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vgpu.adapters.dmem import pod_cgroup
from vgpu.adapters.hook_socket import HookSocket
from vgpu.adapters.kube.calls import KubeError
from vgpu.adapters.procfs import CgroupReader
from vgpu.adapters.vgpu_core_install import install_cdi_hook
from vgpu.core.errors import ConfigError, InvalidRequest
from vgpu.daemons.dra_driver.joiners import Joiners
from vgpu.daemons.dra_driver.limits import ClaimLimits
from vgpu.dra.hook_request import OK, BadRequest, HookRequest, parse_request, pod_uid_in_cgroup
from vgpu.dra.pod_limits import reserved_pods, sharing_refusal
from vgpu.dra.prepare import NodeGpus, PreparedClaim

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HookAnswers:
    """Answers the hook's requests (module doc); `answer` is the socket's answering function."""

    limits: ClaimLimits
    node: Callable[[], NodeGpus]
    prepared: Callable[[str], PreparedClaim | None]  # a claim in the checkpoint, by UID
    cgroups: CgroupReader
    joiners: Joiners | None = None

    def answer(self, data: bytes) -> str:
        try:
            request = parse_request(data)
        except BadRequest as e:
            return f"vgpu DRA driver: bad request from the CDI hook: {e}"
        answer = self._limit(request)
        if answer != OK:
            log.warning("refused a container of claim %s: %s", request.claim_uid, answer)
        return answer

    def _pod_uid(self, request: HookRequest) -> str | None:
        if request.pod_uid is not None or request.pid is None:
            return request.pod_uid
        text = self.cgroups.read(request.pid)
        return None if text is None else pod_uid_in_cgroup(text)

    def _limit(self, request: HookRequest) -> str:
        done = self.prepared(request.claim_uid)
        if done is None:
            return f"claim {request.claim_uid} is not prepared on this node"
        where = f"claim {done.namespace}/{done.name}"
        pod_uid = self._pod_uid(request)
        if pod_uid is None:
            return (
                f"{where}: cannot tell the container's pod: the runtime set no "
                "io.kubernetes.cri.sandbox-uid (containerd) or io.kubernetes.pod.uid (CRI-O) "
                "annotation and the container's cgroup names no "
                "pod (the driver needs hostPID to read it)"
            )
        try:
            claim = self.limits.kube.get_resource_claim(done.namespace, done.name)
        except KubeError as e:
            return f"{where}: cannot read the claim to set the driver's memory limit: {e}"
        if (claim.get("metadata") or {}).get("uid") != done.uid:
            return f"{where} was deleted and created again; the prepared claim is gone"
        reserved = reserved_pods(claim)
        ref = next((r for r in reserved if r.uid == pod_uid), None)
        if ref is None:
            return f"{where} is not reserved for pod {request.pod or pod_uid} ({pod_uid})"
        cgroupfs = self.limits.cgroupfs
        cgroup = pod_cgroup(pod_uid, cgroupfs)
        if cgroup is None:
            return (
                f"{where}: pod {ref.name} has no cgroup under {cgroupfs}, so the "
                "driver's memory limit cannot be set"
            )
        node = self.node()
        others = [r for r in reserved if r.uid != pod_uid and pod_cgroup(r.uid, cgroupfs)]
        try:
            shared = sharing_refusal(claim, others, node.pool, node.gpus)
        except InvalidRequest as e:
            return f"{where}: {e}"
        if shared is not None:
            return f"{where}: {shared}"
        refused = self.limits.apply_pod(claim, ref, cgroup, node.pool, node.gpus)
        if refused is not None:
            return f"{where}: {refused}"
        if self.joiners is not None:
            self.joiners.limited(claim, frozenset({pod_uid}))
        return OK


def serve_hook(
    program: Path, state_dir: Path, socket_path: Path, answers: HookAnswers
) -> tuple[HookSocket, tuple[str, str]]:
    """Install the hook program and serve its socket: the server and the (program, socket)
    host paths the claims' CDI specs name from now on. Raises ConfigError: the driver's limits
    must not run without the hook that makes containers wait for them."""
    installed = install_cdi_hook(program, state_dir)
    server = HookSocket(socket_path, answers.answer)
    try:
        server.start()
    except OSError as e:
        raise ConfigError(
            f"--state-dir: cannot listen on {socket_path} for the CDI hook: {e.strerror or e}; "
            "use a shorter, writable host directory"
        ) from None
    log.info("CDI hook %s answered on %s", installed, socket_path)
    return server, (str(installed), str(socket_path))
