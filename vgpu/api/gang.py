"""The label and annotation keys that put a pod into a gang, shared by every reader.

The extender (which plans gangs) and the report (which shows them) must agree on these keys; one
drifted once (`vgpu.io/gang-size`), so they live here only.
"""

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
"""scheduler-plugins: the minimum is the PodGroup object's `spec.minMember`."""
LEGACY_GROUP_NAME = "pod-group.scheduling.sigs.k8s.io/name"
LEGACY_GROUP_OLD = "pod-group.scheduling.sigs.k8s.io"
"""The older bare form of the lightweight label."""
LEGACY_GROUP_MIN = "pod-group.scheduling.sigs.k8s.io/min-available"
GANG_NAME = "vgpu.io/gang-name"
GANG_SIZE = "vgpu.io/gang-size"
