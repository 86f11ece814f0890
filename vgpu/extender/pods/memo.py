"""Parsing and applying a pod once per content, not once per version.

A pod's version changes with every write to it, and most writes change little that `pod_spec`
reads: the kubelet's status (conditions, container statuses, IPs, a phase that is not terminal),
managedFields, the deletion timestamp, and the annotations of the hand-off (the extender's
assignment and its signature, the node agent's `vgpu.io/admitted`), which the cache reads itself,
never through `pod_spec`; the binding and the end of the pod change only its node and whether it is
terminal. Parses are kept by (uid, resourceVersion), as kube-scheduler sends the version it has to
filter and prioritize, and by a digest of the rest of what `pod_spec` reads (`read_digest`, made
of the same table of fields, `podspec.READ_METADATA`, through which the parse reads), so that a
new version reading alike is not parsed again. A bound pod's version that also has the same
hand-off annotations (`notes_of`) as the one the cache last applied (`Observed`) is not applied
again either (`ClusterCache.apply_pod`). bench/pod_watch_cost.py measures both;
tests/extender/test_podmemo.py checks that the digest holds all `pod_spec` reads.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NamedTuple, TypeVar

from vgpu.adapters import fastjson
from vgpu.api.admitted import ADMITTED
from vgpu.api.assignment import ASSIGNMENT, SIGNATURE
from vgpu.api.podread import is_terminal
from vgpu.api.podspec import READ_METADATA, PodSpec, node_of, read_part
from vgpu.core.model import Assignment

Obj = dict[str, Any]
K = TypeVar("K")
KEPT = 4096
"""Parses kept by version and by content (a burst of pending pods is parsed once per verb
otherwise); each memo is emptied when full."""
UNREAD_ANNOTATIONS = frozenset({ASSIGNMENT, SIGNATURE, ADMITTED})
"""Annotations that change during a pod's life and that `pod_spec` does not read."""
Notes = tuple[object, object, object]
"""A pod's annotations the cache reads itself: assignment, its signature, admitted."""


class Observed(NamedTuple):
    """What the cache last made of a bound pod: from this parse and these annotations, this
    assignment (applying them again changes nothing while the pod holds it)."""

    spec: PodSpec
    notes: Notes
    assignment: Assignment


def notes_of(annotations: Obj) -> Notes | None:
    """The annotations the cache reads itself; None unless each is a string or absent."""
    notes = (annotations.get(ASSIGNMENT), annotations.get(SIGNATURE), annotations.get(ADMITTED))
    return notes if all(n is None or isinstance(n, str) for n in notes) else None


def read_digest(pod: Obj) -> bytes | None:
    """A digest of what `pod_spec` reads of a decoded pod (`read_part`: the `READ_METADATA`
    fields, the spec, the phase) but what changes within a pod's life and is set per version or
    read by the cache itself: the node name, whether the phase is terminal (`ParsedPods` sets
    both) and `UNREAD_ANNOTATIONS`. Pods with equal digests parse alike but for the node and the
    phase. None when it cannot be told (metadata, annotations or spec not maps, values JSON
    cannot carry): such a pod is parsed every time."""
    part = read_part(pod)
    meta, spec = part["metadata"], part["spec"] or {}
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        return None
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict):
        return None
    kept = {k: v for k, v in annotations.items() if k not in UNREAD_ANNOTATIONS}
    read = (
        *(kept if name == "annotations" else meta.get(name) for name in READ_METADATA),
        {k: v for k, v in spec.items() if k != "nodeName"},
    )
    try:
        return hashlib.sha256(fastjson.dumps(read)).digest()
    except (TypeError, ValueError, RecursionError):
        return None


class ParsedPods:
    """Parses kept by version and by content; `parse` raises what the parse raises."""

    def __init__(self, parse: Callable[[Obj], PodSpec], kept: int = KEPT) -> None:
        self._parse = parse
        self._kept = kept
        self._by_version: dict[tuple[str, str], PodSpec] = {}
        self._by_content: dict[bytes, PodSpec] = {}

    def parse(self, pod: Obj) -> PodSpec:
        """The pod's parse: kept for its version, else for its content, else parsed now.
        kube-scheduler sends the same version to filter and prioritize, and one version of one
        object never changes in Kubernetes."""
        meta = pod.get("metadata")
        uid, version = (
            (meta.get("uid"), meta.get("resourceVersion")) if isinstance(meta, dict) else (0, 0)
        )
        if not isinstance(uid, str) or not isinstance(version, str) or not uid or not version:
            return self._parse(pod)  # not a watched or stored object: kept nowhere
        spec = self._by_version.get((uid, version))
        if spec is None:
            spec = self._by_digest(pod)
            _keep(self._by_version, (uid, version), spec, self._kept)
        return spec

    def _by_digest(self, pod: Obj) -> PodSpec:
        """The parse kept for the pod's content, with its node and phase (the one kept is
        replaced by one with this version's: the next version most likely has the same)."""
        digest = read_digest(pod)
        spec = None if digest is None else self._by_content.get(digest)
        if spec is None:
            spec = self._parse(pod)
        else:
            node, terminal = node_of(pod.get("spec") or {}), is_terminal(pod)
            if (spec.node, spec.terminal) == (node, terminal):
                return spec
            spec = replace(spec, node=node, terminal=terminal)
        if digest is not None:
            _keep(self._by_content, digest, spec, self._kept)
        return spec


def _keep(memo: dict[K, PodSpec], key: K, spec: PodSpec, kept: int) -> None:
    if len(memo) >= kept:
        memo.clear()
    memo[key] = spec
