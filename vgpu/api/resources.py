"""The names a vgpu installation puts on the cluster, built from one configured domain.

The node agent advertises two extended resources, `<domain>/cores` and `<domain>/memory`, labels
the node under `<domain>/` and writes the GPU inventory to the node annotation
`<domain>/gpu-inventory`. The extender and the report must read the same names, so every component
takes the domain as a setting (`--resource-domain`, default `vgpu.io`) and builds the names here.

The pod annotations (the signed assignment, `vgpu.io/admitted`, gangs, GPU selection) are the
project's own API and keep the `vgpu.io/` prefix whatever the domain: the domain only renames
what the node advertises. Pure.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from vgpu.core.errors import ConfigError

DEFAULT_DOMAIN = "vgpu.io"
# A DNS subdomain as Kubernetes validates the prefix of a qualified name (lowercase, dots).
_DOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class UnitKind(enum.Enum):
    """The two kinds of share a GPU is split into (the value is the device-ID letter)."""

    CORES = "c"
    MEMORY = "m"


@dataclass(frozen=True, slots=True)
class ResourceNames:
    """Every cluster-visible name derived from the domain, e.g. vgpu.io/cores."""

    domain: str = DEFAULT_DOMAIN

    @property
    def cores(self) -> str:
        return f"{self.domain}/cores"

    @property
    def memory(self) -> str:
        return f"{self.domain}/memory"

    @property
    def inventory(self) -> str:
        """The node annotation holding the GPU inventory (`vgpu.api.inventory`)."""
        return f"{self.domain}/gpu-inventory"

    def label(self, name: str) -> str:
        """A node label under the domain, e.g. `vgpu.io/gpu.count`."""
        return f"{self.domain}/{name}"

    def kind_of(self, resource: str) -> UnitKind:
        if resource == self.cores:
            return UnitKind.CORES
        if resource == self.memory:
            return UnitKind.MEMORY
        raise ValueError(f"resource: {resource!r} is neither {self.cores} nor {self.memory}")


DEFAULT_NAMES = ResourceNames()


def resource_names(domain: str, field: str = "--resource-domain") -> ResourceNames:
    """The names for an operator-given domain; raises `ConfigError` naming `field` if invalid."""
    if len(domain) > 253 or not _DOMAIN.match(domain):
        raise ConfigError(
            f"{field}: {domain!r} is not a DNS subdomain; use lowercase letters, digits, '-' "
            "and '.', e.g. vgpu.io (and the same value for the node agents, the extender and "
            "kubectl inspect vgpu)"
        )
    return ResourceNames(domain)
