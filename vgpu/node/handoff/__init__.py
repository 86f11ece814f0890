"""The hand-off (docs/handshake.md): the node's side of admitting what the extender assigned.

`admissions` (`Handoff`, the ledger: the pods bound to this node, their pending and admitted
containers), `entries` (the ledger's values and the check of a pod's signed assignment),
`matching` (which pending containers an Allocate could be for), `reconcile` (the ledger
rewritten from the kubelet's pod-resources record and checkpoint) and `allocate`
(`HandoffPolicy`: the kubelet's GetPreferredAllocation and Allocate answered from the ledger).
Pure, as the rest of `vgpu.node`.
"""
