"""Identifier types shared by every layer.

`NewType`s cost nothing at run time and keep node names, GPU uuids and pod keys from being mixed up.
"""

from __future__ import annotations

from typing import NewType

NodeName = NewType("NodeName", str)
GpuUUID = NewType("GpuUUID", str)
PodKey = NewType("PodKey", str)
"""``namespace/name`` of a pod."""
GangKey = NewType("GangKey", str)
"""``namespace/gang-name`` of a pod group."""


def pod_key(namespace: str, name: str) -> PodKey:
    """The canonical key of a pod."""
    return PodKey(f"{namespace}/{name}")


def gang_key(namespace: str, name: str) -> GangKey:
    """The canonical key of a gang (pod group)."""
    return GangKey(f"{namespace}/{name}")
