"""`kubectl inspect vgpu`: how the cluster's GPUs are shared, read straight from the API server.

Layout: `snapshot` (the saved-cluster file format), `pods` and `gangs` (what a pod or a pod group
says about vgpu), `build` (pure: snapshot -> `model.Report`), `table`/`details`/`export`
(pure renderers), `reader` (the only module that talks to Kubernetes, through
`vgpu.adapters.kube.calls.KubeApi`) and `cli`. The report never asks the extender: it is computed
from the nodes' inventory annotations and the pods' assignment annotations, so it works while the
extender is down and shows what the cluster really holds.
"""
