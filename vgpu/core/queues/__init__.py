"""Queues: what each deserves and which held jobs go, in vGPU units.

`proportion` (the queues and what each deserves, kube-batch's proportion), `jobs` (queued pods
grouped into whole jobs and the book of what queues hold), `release` (which held jobs to
release now, in fair order, only where they fit) and reclaim (`reclaim`: taking back from
queues over their share; `reclaim_nodes`: its victims per node for a one-node job, each node
searched by `reclaim_search`; `reclaim_asks`: which waiting jobs ask in a pass). Shared by the extender's leader and
`vgpu simulate`; pure, as the rest of `vgpu.core`.
"""
