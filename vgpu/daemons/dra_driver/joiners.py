"""Pods that join a claim already prepared here get the driver's memory limit as soon as
their pod cgroup appears, not at the next periodic pass.

Why the driver must look for them itself: the kubelet calls `NodePrepareResources` once per
claim and node. For a second pod using a claim it already prepared it only adds the pod to its
own cache and goes on ("If this claim is already prepared, continue preparing for any remaining
claims": Kubernetes `pkg/kubelet/cm/dra/manager.go`, `prepareResources`), so no call reaches
the driver for that pod.

What orders what: the scheduler reserves the claim for the pod (`status.reservedFor`) before it
binds the pod, and the kubelet refuses a pod the claim is not reserved for (`IsReservedForPod`,
same function); the kubelet makes the pod's cgroup (`EnsureExists` in `SyncPod`) before it
prepares the pod's claims and before the sandbox (`vgpu.dra.pod_limits`). So this loop follows
the claims (the driver's one claim watch, `vgpu.daemons.dra_driver.claim_watch`) and, for each
reserved pod whose limit is not set yet, looks for its cgroup every `poll_s` and sets the limit
there.

What does not hold here alone: nothing in the kubelet waits for the driver. From the pod cgroup
it goes on to the sandbox (`RunPodSandbox`) and the containers without asking, so this loop
could be late by up to `poll_s` plus the reads of the pod and its claims and one NVML call per
GPU. Where the claim's CDI spec carries the driver's hook, the runtime waits for the driver
before each container (`vgpu.daemons.dra_driver.hook`), which sets the limit itself, so the
window is closed there and this loop is a second line. A limit that cannot be set is logged (no
call exists to refuse the pod through) and set again by the periodic pass
(`DraDriver.reapply_limits`), which also covers a broken watch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from vgpu.adapters.dmem import pod_cgroup
from vgpu.adapters.kube.reflector import SYNCED, WatchEvent
from vgpu.api.dra import claim_shares
from vgpu.core.errors import VgpuError
from vgpu.daemons.dra_driver.limits import ClaimLimits
from vgpu.dra.pod_limits import PodRef, reserved_pods
from vgpu.dra.prepare import NodeGpus

log = logging.getLogger(__name__)
Obj = Mapping[str, Any]
DEFAULT_POLL_S = 0.05


def _uid(claim: Obj) -> str:
    return str((claim.get("metadata") or {}).get("uid") or "")


class Joiners:
    """The claims allocated here as last seen, and which of their pods have their limit."""

    def __init__(
        self,
        limits: ClaimLimits,
        node: Callable[[], NodeGpus],
        is_prepared: Callable[[str], bool],
        stop: threading.Event,
        poll_s: float = DEFAULT_POLL_S,
    ) -> None:
        self._limits, self._node, self._is_prepared = limits, node, is_prepared
        self._stop, self._poll_s = stop, poll_s
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._claims: dict[str, Obj] = {}  # claim uid -> the claim, allocated on this node
        self._done: dict[str, set[str]] = {}  # claim uid -> pod uids whose limit is set

    def seen(self, kind: str, claim: Obj) -> None:
        """A watch event: keep the claim while it is allocated here, forget it otherwise."""
        uid, pool = _uid(claim), self._node().pool
        try:
            here = kind != "DELETED" and any(s.pool == pool for s in claim_shares(claim))
        except VgpuError:
            here = False
        with self._lock:
            if not here:
                self._claims.pop(uid, None)
                self._done.pop(uid, None)
                return
            self._claims[uid] = claim
            reserved = {ref.uid for ref in reserved_pods(claim)}
            self._done[uid] = self._done.get(uid, set()) & reserved
        self._wake.set()

    def with_cgroups(self, claim: Obj) -> frozenset[str]:
        """The claim's reserved pods whose cgroup is here now: taken before prepare sets their
        limits, so that a cgroup appearing meanwhile is left to this loop, not marked done."""
        cgroupfs = self._limits.cgroupfs
        return frozenset(r.uid for r in reserved_pods(claim) if pod_cgroup(r.uid, cgroupfs))

    def limited(self, claim: Obj, pods: frozenset[str]) -> None:
        """Prepare set the limits of the claim's pods `pods` (`with_cgroups`, before it)."""
        with self._lock:
            self._done.setdefault(_uid(claim), set()).update(pods)
        self._wake.set()

    def pending(self) -> list[tuple[Obj, PodRef]]:
        """The reserved pods of prepared claims whose limit is not set yet."""
        with self._lock:
            claims = [(claim, set(self._done.get(uid, ()))) for uid, claim in self._claims.items()]
        return [
            (claim, ref)
            for claim, done in claims
            if self._is_prepared(_uid(claim))
            for ref in reserved_pods(claim)
            if ref.uid not in done
        ]

    def step(self) -> int:
        """Set the limit of every pending pod whose cgroup is there; returns those still waiting."""
        waiting, node = 0, self._node()
        for claim, ref in self.pending():
            cgroup = pod_cgroup(ref.uid, self._limits.cgroupfs)
            if cgroup is None:
                waiting += 1
                continue
            refused = self._limits.apply_pod(claim, ref, cgroup, node.pool, node.gpus)
            if refused is not None:
                log.warning(
                    "pod joining a prepared claim runs unlimited until the next pass: %s", refused
                )
            with self._lock:
                self._done.setdefault(_uid(claim), set()).add(ref.uid)
        return waiting

    def run(self) -> None:
        """Look for the pending pods' cgroups every `poll_s` while any wait, else sleep until a
        claim changes."""
        while not self._stop.is_set():
            self._wake.clear()
            try:
                waiting = self.step()
            except Exception as e:  # a bad claim or a failing API must never end the loop
                log.warning("cannot set the limits of pods joining prepared claims: %s", e)
                waiting = 1
            if waiting:
                self._stop.wait(self._poll_s)
            else:
                self._wake.wait(1.0)

    def wake(self) -> None:
        """Wake `run` (it sees the stop at once)."""
        self._wake.set()

    def claim_event(self, event: WatchEvent) -> None:
        """The claims' watch (`claim_watch`): after a full list, forget the limits recorded
        for claims that are gone."""
        if event.type != SYNCED:
            self.seen(event.type, event.object)
            return
        with self._lock:
            self._done = {uid: done for uid, done in self._done.items() if uid in self._claims}

    def watch_restarted(self) -> None:
        """A new stream starts from a full list: what was kept is dropped."""
        with self._lock:
            self._claims.clear()
