"""Whether a pod may run on a node as kube-scheduler's own filters judge it, for placements
made without kube-scheduler: the queue pass's and a gang's.

The extender's filter verb is asked only about the nodes kube-scheduler's filters passed, so its
answer for the pod asked about never needs these. But the queue pass places held pods and
chooses reclaim's victims without kube-scheduler, and the gang coordinator plans every member of
a gang when the first one is asked about (or the pass releases the gang): they apply the filters
a pod's spec controls themselves (`allowed_nodes`). A pod given a place on a node it cannot run on
is never offered that node by kube-scheduler, and waits, its GPUs held, until the gang timeout;
reclaim evicted other teams' pods on such nodes, for a pod that then could not use what they freed
(a tenant of a reclaiming queue could evict other teams' pods at will with a pod naming a node
pool that does not exist).

The rules are kube-scheduler's (k8s.io/component-helpers `scheduling/corev1/nodeaffinity` and
`scheduling/corev1` `TolerationsTolerateTaint`; plugins NodeAffinity, TaintToleration,
NodeUnschedulable):

* `spec.nodeSelector`: every label, equal;
* required node affinity: any of the `nodeSelectorTerms`; a term matches when all its
  `matchExpressions` (labels: In, NotIn, Exists, DoesNotExist, Gt, Lt) and `matchFields`
  (`metadata.name`: In, NotIn) do; a term with neither matches nothing, and so does a term
  kube-scheduler cannot build (`labels.NewRequirement`: a value that is no label value, a Gt/Lt
  value that is no Go int64), which the API server's validation lets through (a tenant's
  `NotIn: ["-"]` put its pod on no node while the pass found it placeable and reclaimed for
  it); Gt/Lt read a node's label as Go's `strconv.ParseInt` does (not Python's `int`: `1_0`);
* taints with effect NoSchedule or NoExecute must each be tolerated (PreferNoSchedule is a
  preference); `spec.unschedulable` (a cordon) counts as the taint
  `node.kubernetes.io/unschedulable:NoSchedule`;
* NodeResourcesFit for resources other than CPU and memory (`vgpu.api.noderoom`): what the pod
  requests of each must not exceed what the node could hold empty.

An operator these rules do not know (a newer API's) is taken as satisfied: the pass then acts as
it did before it read constraints, rather than holding a pod back for good. Pure: dicts in,
frozen values out; nothing raises whatever the objects hold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.api.noderoom import Amounts, has_room, listed, node_allocatable, pod_requests
from vgpu.core.ids import NodeName, PodKey

UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
"""The taint a cordoned node counts as (k8s.io/api/core/v1 `TaintNodeUnschedulable`)."""
_HARD = ("NoSchedule", "NoExecute")
_KNOWN_LABEL_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
"""k8s.io/apimachinery `validation.IsValidLabelValue` (with at most 63 characters)."""
_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the pass needs of a Node: its name, labels, hard taints and what it could hold of
    resources other than CPU and memory (`vgpu.api.noderoom`)."""

    name: str
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()
    allocatable: Amounts = ()

    def label(self, key: str) -> str | None:
        for k, v in self.labels:
            if k == key:
                return v
        return None


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Term:
    labels: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """k8s.io/api/core/v1 `Toleration.ToleratesTaint`."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return True  # Exists, or an operator of a newer API (module doc)


@dataclass(frozen=True, slots=True)
class NodeTerms:
    """A pod's constraints on its node (hashable: a pass memoises the nodes per value)."""

    selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[Term, ...] | None = None
    """Required node affinity's terms; None: no required affinity."""
    tolerations: tuple[Toleration, ...] = ()
    requests: Amounts = ()
    """What the pod requests of resources other than CPU and memory (`vgpu.api.noderoom`)."""

    def admits(self, node: NodeFacts, judged: frozenset[str] = frozenset()) -> bool:
        """Whether kube-scheduler's NodeAffinity, TaintToleration and NodeUnschedulable filters
        pass the pod on `node` (module doc), and NodeResourcesFit for the `judged` resources
        other than CPU and memory, on the node empty."""
        if any(node.label(k) != v for k, v in self.selector):
            return False
        if self.terms is not None and not any(_term_matches(t, node) for t in self.terms):
            return False
        if not all(any(t.tolerates(taint) for t in self.tolerations) for taint in node.taints):
            return False
        return has_room(self.requests, node.allocatable, judged)


NO_TERMS = NodeTerms()
"""A pod that names no node constraint and tolerates nothing."""

NO_NODE_ADMITS = (
    "no node admits it: its nodeSelector, node affinity, tolerations or requests of other"
    " resources than CPU and memory rule out every node"
)
"""What the extender and the reports say of a pod `admits_none` is true for."""


def allowed_nodes(
    terms: NodeTerms, facts: Mapping[str, NodeFacts], names: Iterable[NodeName]
) -> list[NodeName] | None:
    """The nodes of `names` a pod with `terms` may use; a node whose facts are not known (not
    watched yet) counts as allowed. None when that is every one of them, so that a placement
    among them is exactly the placement without constraints."""
    named = list(names)
    judged = _judged(facts)
    allowed = [n for n in named if n not in facts or terms.admits(facts[n], judged)]
    return None if len(allowed) == len(named) else allowed


def admits_none(terms: NodeTerms, facts: Mapping[str, NodeFacts]) -> bool:
    """Whether a pod with `terms` may run on none of the nodes of `facts` (False when none is
    known): kube-scheduler never schedules it, so a gang it belongs to is never complete."""
    judged = _judged(facts)
    return bool(facts) and not any(terms.admits(f, judged) for f in facts.values())


def _judged(facts: Mapping[str, NodeFacts]) -> frozenset[str]:
    """The resources judged: those some watched node lists (`vgpu.api.noderoom`)."""
    return listed(f.allocatable for f in facts.values())


def allowed_by_pod(
    terms_of: Mapping[PodKey, NodeTerms], facts: Mapping[str, NodeFacts], names: Iterable[NodeName]
) -> dict[PodKey, list[NodeName]]:
    """Each pod's `allowed_nodes` among `names`, for the pods some node is ruled out for (a pod
    left out may use every node): the gang planner's `allowed` (`vgpu.core.gang.plan`). Each
    distinct value of the terms is matched against the nodes once."""
    listed = list(names)
    seen: dict[NodeTerms, list[NodeName] | None] = {}
    out: dict[PodKey, list[NodeName]] = {}
    for key, terms in terms_of.items():
        if terms not in seen:
            seen[terms] = allowed_nodes(terms, facts, listed)
        allowed = seen[terms]
        if allowed is not None:
            out[key] = allowed
    return out


def node_facts(obj: Mapping[str, Any]) -> NodeFacts:
    """A Node object's facts; parts that are not of the API's shape are left out."""
    meta = _map(obj.get("metadata"))
    spec = _map(obj.get("spec"))
    labels = tuple(
        sorted((k, v) for k, v in _map(meta.get("labels")).items() if isinstance(v, str))
    )
    taints = []
    for raw in _list(spec.get("taints")):
        t = _map(raw)
        effect = _str(t.get("effect"))
        if effect in _HARD:
            taints.append(Taint(_str(t.get("key")), _str(t.get("value")), effect))
    if spec.get("unschedulable") is True:
        taints.append(Taint(UNSCHEDULABLE, "", "NoSchedule"))
    return NodeFacts(_str(meta.get("name")), labels, tuple(taints), node_allocatable(obj))


def pod_terms(spec: Mapping[str, Any]) -> NodeTerms:
    """A pod spec's node constraints (module doc)."""
    selector = tuple(sorted((str(k), str(v)) for k, v in _map(spec.get("nodeSelector")).items()))
    node_affinity = _map(_map(spec.get("affinity")).get("nodeAffinity"))
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = None
    if isinstance(required, Mapping):
        terms = tuple(
            Term(
                _requirements(_map(raw).get("matchExpressions")),
                _requirements(_map(raw).get("matchFields")),
            )
            for raw in _list(required.get("nodeSelectorTerms"))
        )
    tolerations = tuple(
        Toleration(
            _str(t.get("key")), _str(t.get("operator")), _str(t.get("value")), _str(t.get("effect"))
        )
        for t in map(_map, _list(spec.get("tolerations")))
    )
    return NodeTerms(selector, terms, tolerations, pod_requests(spec))


def _term_matches(term: Term, node: NodeFacts) -> bool:
    if not term.labels and not term.fields:
        return False
    if not all(map(_buildable, term.labels)):
        return False  # kube-scheduler's term has a parse error: it matches no node
    labels_ok = all(_label_matches(r, node.label(r.key)) for r in term.labels)
    return labels_ok and all(_field_matches(r, node) for r in term.fields)


def _label_matches(req: Requirement, value: str | None) -> bool:
    op = req.operator
    if op not in _KNOWN_LABEL_OPS:
        return True  # module doc
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if value is None or len(req.values) != 1:
        return False
    have, bound = _go_int(value), _go_int(req.values[0])
    if have is None or bound is None:
        return False
    return have > bound if op == "Gt" else have < bound


def _buildable(req: Requirement) -> bool:
    """Whether `labels.NewRequirement` builds `req` (k8s.io/apimachinery `labels`): every value
    a label value, and one Go int64 for Gt/Lt. The key, and the value counts of the other
    operators, are the API server's to validate."""
    if not all(len(v) <= 63 and _LABEL_VALUE.fullmatch(v) for v in req.values):
        return False
    if req.operator in ("Gt", "Lt"):
        return len(req.values) == 1 and _go_int(req.values[0]) is not None
    return True


def _go_int(text: str) -> int | None:
    """`strconv.ParseInt(text, 10, 64)`; None where it fails (Python's `int` takes more: `1_0`,
    spaces, other scripts' digits, any size)."""
    if not _GO_INT.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64[0] <= value <= _INT64[1] else None


def _field_matches(req: Requirement, node: NodeFacts) -> bool:
    if req.key != "metadata.name":
        return False  # the only field kube-scheduler matches
    if req.operator == "In":
        return node.name in req.values
    if req.operator == "NotIn":
        return node.name not in req.values
    return req.operator not in _KNOWN_LABEL_OPS  # module doc


def _requirements(raw: object) -> tuple[Requirement, ...]:
    out = []
    for r in map(_map, _list(raw)):
        values = tuple(str(v) for v in _list(r.get("values")))
        out.append(Requirement(_str(r.get("key")), _str(r.get("operator")), values))
    return tuple(out)


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""
