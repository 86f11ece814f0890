"""Reading a pod object into a `PodSpec` with the extender's memory unit and resource names.

A part of `ClusterCache` (`vgpu.extender.cache.cluster`) that outlives its rebuilds: watched pods
are parsed once per version and once per content (`vgpu.extender.pods.memo`), request bodies afresh.
An object of the wrong shape is an `InvalidRequest` like any other bad pod, never another
exception, so no watch event or request can crash the extender.
"""

from __future__ import annotations

from typing import Any

from vgpu.api.podspec import PodSpec, pod_spec
from vgpu.api.resources import ResourceNames
from vgpu.core.errors import InvalidRequest
from vgpu.extender.pods.memo import ParsedPods

Obj = dict[str, Any]
MALFORMED = (TypeError, AttributeError, ValueError, KeyError, IndexError, RecursionError)
"""What reading an object of the wrong shape raises (a string where a map belongs...)."""


class PodParser:
    """Parses pods (raising `InvalidRequest`), remembering the parses of watched pods."""

    def __init__(self, memory_unit_mib: int, names: ResourceNames) -> None:
        self._unit = memory_unit_mib
        self._names = names
        self._parsed = ParsedPods(self.parse_fresh)

    def parse(self, obj: Obj) -> PodSpec:
        """Parse a watched pod, once per version and once per content."""
        return self._parsed.parse(obj)

    def parse_fresh(self, obj: Obj) -> PodSpec:
        """Parse a pod and keep nothing."""
        try:
            return pod_spec(obj, memory_unit_mib=self._unit, names=self._names)
        except MALFORMED as err:
            raise InvalidRequest(
                "Pod", f"malformed object ({type(err).__name__}: {err})", "send a v1.Pod"
            ) from None
