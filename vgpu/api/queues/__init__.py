"""The queues' contract on the cluster, which the extender's leader, the chart and the report share.

`config` (the ConfigMap's `queues.json` read into `QueueSpec`s, the queue label and gate, the pods
Kueue manages), `namespaces` (which namespaces each queue serves), `pods` (a queued pod as the
leader's release pass and the report both read it) and `in_force` (what the leader says on its
Lease: that it runs queues, and with which configuration). Pure, as the rest of `vgpu.api`.
"""
