"""What the node agent writes to the API server: node labels and inventory, admissions, Events.

Every write here is idempotent and retried by the maintenance loop, so each method reports
success as a value instead of raising: labels and the `vgpu.io/gpu-inventory` annotation are
patched only when they differ, `vgpu.io/admitted` only where the ledger says it is out of date,
and an Event that cannot be recorded is logged and dropped (it is advice, not state).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vgpu.adapters.kube.calls import KubeApi, KubeError, KubeNotFound
from vgpu.adapters.streak import Streak
from vgpu.agent.kubelet_stale import KubeletStale
from vgpu.api.assignment import ADMITTED
from vgpu.core.ids import PodKey
from vgpu.node.devices import ResourceNames
from vgpu.node.handoff.admissions import Handoff
from vgpu.node.inventory import annotation_patch, build_inventory
from vgpu.node.labels import label_patch, node_labels
from vgpu.node.model import GpuInventory

if TYPE_CHECKING:
    from vgpu.agent.config import AgentConfig

log = logging.getLogger(__name__)
COMPONENT = "vgpu-node-agent"


class NodePublisher:
    """Node metadata, admitted annotations and Warning Events, for one node."""

    def __init__(
        self,
        config: AgentConfig,
        kube: KubeApi | None,
        names: ResourceNames,
        handoff: Handoff,
        stale: KubeletStale,
        node_state: Callable[[], tuple[GpuInventory | None, frozenset[str]]],
    ) -> None:
        """`node_state` gives the inventory and unhealthy GPUs as of now."""
        self.config = config
        self._kube = kube
        self.names = names
        self.handoff = handoff
        self.stale = stale
        self._node_state = node_state
        self.dirty = True  # the node's metadata may differ from what we'd publish
        self.memory_backend = ""  # `driver` or the --mode, once the agent chose (a label)
        self.patches = 0
        self._node_uid = ""
        self._streak = Streak(log, f"node {config.node_name}: cannot update labels/annotations")

    def sync_node(self) -> bool:
        """Patch the node's labels and inventory annotation if they differ; False on failure."""
        assert self._kube is not None
        name = self.config.node_name
        try:
            meta = self._kube.get_node(name).get("metadata") or {}
            self._node_uid = str(meta.get("uid") or "")
            labels, value = self._changes(meta)
            if labels or value is not None:
                annotations = {self.names.inventory: value} if value is not None else None
                self._kube.patch_node_metadata(name, labels=labels, annotations=annotations)
                self.patches += 1
                log.info(
                    "node %s: patched %d label(s), inventory=%s", name, len(labels), bool(value)
                )
            self.dirty = False
            self._streak.succeeded()
            return True
        except KubeError as e:
            self._streak.failed(e)
            return False

    def _changes(self, meta: dict[str, Any]) -> tuple[dict[str, str | None], str | None]:
        """The label patch and the new annotation value (None: unchanged) for `meta`."""
        inventory, unhealthy = self._node_state()
        assert inventory is not None
        domain = self.config.domain
        labels = label_patch(
            meta.get("labels") or {},
            node_labels(inventory, domain=domain, memory_backend=self.memory_backend),
            domain=domain,
        )
        desired = build_inventory(
            inventory,
            unhealthy=unhealthy,
            memory_unit_mib=self.config.memory_unit_mib,
            stale=self.stale.published(),
        )
        current = (meta.get("annotations") or {}).get(self.names.inventory)
        return labels, annotation_patch(current, desired)

    def patch_admitted(self) -> bool:
        """Write `vgpu.io/admitted` where it is out of date; False if a patch failed."""
        assert self._kube is not None
        for pod, value in self.handoff.annotation_updates():
            namespace, name = pod.split("/", 1)
            try:
                self._kube.patch_pod_annotations(namespace, name, {ADMITTED: value})
                self.handoff.patched(pod, value)
            except KubeNotFound:
                self.handoff.patched(pod, value)
            except KubeError as e:
                log.warning("cannot patch %s on %s (will retry): %s", ADMITTED, pod, e)
                return False
        return True

    def node_event(self, reason: str, message: str) -> None:
        """A Warning Event on this node (with its UID once known)."""
        name = self.config.node_name
        meta = {"name": name, "uid": self._node_uid} if self._node_uid else {"name": name}
        involved = {"kind": "Node", "apiVersion": "v1", "metadata": meta}
        error = self._create(involved, reason, message)
        if error is not None:
            log.warning("cannot record event %s for node %s: %s", reason, name, error)

    def pod_event(self, pod: PodKey, uid: str, reason: str, message: str) -> None:
        """A Warning Event on `pod`."""
        namespace, name = pod.split("/", 1)
        meta = {"namespace": namespace, "name": name, "uid": uid}
        involved = {"kind": "Pod", "apiVersion": "v1", "metadata": meta}
        error = self._create(involved, reason, message)
        if error is not None:
            log.warning("cannot record event %s for %s: %s", reason, pod, error)

    def _create(self, involved: dict[str, Any], reason: str, message: str) -> KubeError | None:
        """Record the Event; the API's error if it could not."""
        assert self._kube is not None
        try:
            self._kube.create_event(
                involved, reason=reason, message=message, event_type="Warning", component=COMPONENT
            )
        except KubeError as e:
            return e
        return None
