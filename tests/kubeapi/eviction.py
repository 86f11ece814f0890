"""The pods/eviction subresource, as the real registry serves it (k8s.io/kubernetes
pkg/registry/core/pod/storage/eviction.go, read for this model):

* a pod that is not running (Pending, Succeeded, Failed) is deleted with no budget check;
* otherwise the PodDisruptionBudgets of its namespace whose selector matches its labels are read:
  more than one is a 500; one whose `status.disruptionsAllowed` is 0 (or whose status is older
  than its spec) refuses with 429 TooManyRequests, deleting nothing; one that allows a disruption
  has `disruptionsAllowed` decremented in its status, then the pod is deleted;
* success answers 201 with a Success `Status`;
* with `deleteOptions.dryRun: [All]` the same checks run and nothing is changed (no budget
  spent, no pod deleted), as `kubectl drain --dry-run=server` relies on.

Only `matchLabels` and the four `matchExpressions` operators are modelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.kubeapi.resources import PODS, ApiError, Resource, success_status
from tests.kubeapi.store import Obj, Store

PDBS = Resource(
    "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, has_status=True
)
_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


def evict(store: Store, namespace: str, name: str, body: Any = None) -> Obj:
    """Evict one pod (module doc); raises `ApiError` as the registry answers."""
    pod = store.read(PODS, namespace, name)
    options = body.get("deleteOptions") if isinstance(body, dict) else None
    dry_run = isinstance(options, dict) and "All" in (options.get("dryRun") or [])
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    if phase == "Running":
        _spend_budget(store, namespace, pod, dry_run)
    if not dry_run:
        store.delete(PODS, namespace, name)
    return success_status(201)


def _spend_budget(store: Store, namespace: str, pod: Obj, dry_run: bool) -> None:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    budgets, _ = store.snapshot(PDBS, namespace)
    matching = [b for b in budgets if _selects((b.get("spec") or {}).get("selector"), labels)]
    if len(matching) > 1:
        raise ApiError(
            500,
            "This pod has more than one PodDisruptionBudget, which the eviction "
            "subresource does not support.",
        )
    if not matching:
        return
    budget = matching[0]
    status = budget.get("status") or {}
    meta = budget["metadata"]
    stale = int(status.get("observedGeneration", 0)) < int(meta.get("generation", 0))
    if stale or int(status.get("disruptionsAllowed", 0)) <= 0:
        raise ApiError(429, _VIOLATION, "TooManyRequests")
    if dry_run:
        return

    def spend(current: Obj) -> Obj:
        current.setdefault("status", {})["disruptionsAllowed"] = (
            int(current["status"].get("disruptionsAllowed", 0)) - 1
        )
        return current

    store.update(PDBS, namespace, meta["name"], spend, subresource="status")


def _selects(selector: Any, labels: Mapping[str, str]) -> bool:
    if not isinstance(selector, dict):
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return bool(selector.get("matchLabels") or selector.get("matchExpressions"))
