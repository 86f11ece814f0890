"""Reading a request's pod as every verb uses it: its spec, the policy it names (among those the
operator allowed) and its gang's minimum size.

Filter, prioritize, preemption and bind all read a pod this one way (`PodReader`), so a pod
cannot pass filter under one policy or gang size and be bound under another. A request only
names its pod (namespace, name, UID): the pod is the watch's view of it, never the request's
body, which is not even parsed; a pod the watch does not show within a bounded wait is an error
(`vgpu.extender.watchwait`), so no request body can stand for a pod.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from vgpu.api.podspec import PodSpec, key_of
from vgpu.api.policies import PolicyBook
from vgpu.core.errors import InvalidRequest
from vgpu.core.policy.interface import Policy
from vgpu.core.policy.specs import parse_policy
from vgpu.extender.cache.cluster import ClusterCache
from vgpu.extender.watchwait import WatchWait

GroupSize = Callable[[str, str], int | None]
"""(namespace, PodGroup name) → spec.minMember, or None when there is no such PodGroup."""

DEFAULT_POLICY = parse_policy("default")


class Resolved(NamedTuple):
    """A request's pod as the verbs use it."""

    spec: PodSpec
    policy: Policy
    gang_size: int
    """The gang's minimum (0: no gang)."""


def no_pod_groups(namespace: str, name: str) -> int | None:
    """A `GroupSize` for setups without the PodGroup CRD."""
    return None


class PodReader:
    """Reads a request's pod for the verbs: the cache's parse, the policy book, PodGroup sizes."""

    def __init__(
        self,
        cache: ClusterCache,
        policies: PolicyBook,
        group_size: GroupSize = no_pod_groups,
        watch: WatchWait | None = None,
    ) -> None:
        self.policies = policies
        self._group_size = group_size
        self.watch = watch if watch is not None else WatchWait(cache)

    def read(self, pod: dict[str, object], *, wait: bool = True) -> Resolved:
        """The pod a request names, as the watch shows it (same key and UID), waiting for the
        watch if `wait`. Raises InvalidRequest (`NotWatched` when the watch does not show it;
        `LeaveLoop` on the serving loop's thread when it would wait)."""
        meta = pod.get("metadata")
        uid = meta.get("uid") if isinstance(meta, dict) else None
        spec = self.watch.find(key_of(pod), uid if isinstance(uid, str) else "", wait=wait)
        return self.resolve(spec)

    def resolve(self, spec: PodSpec) -> Resolved:
        """A parsed pod's spec, policy and gang size (0: no gang). Raises InvalidRequest."""
        policies = self.policies
        policy = policies.get(spec.request.policy) if spec.request.policy else policies.default
        size = 0
        if spec.gang is not None:
            found = spec.gang.min_member or self._group_size(spec.gang.namespace, spec.gang.name)
            if found is None:
                raise InvalidRequest(
                    "metadata.labels[scheduling.x-k8s.io/pod-group]",
                    f"PodGroup {spec.gang.key} not found",
                    "create the PodGroup (scheduling.x-k8s.io/v1alpha1) or fix the label",
                )
            size = found
        return Resolved(spec, policy, size)
