"""The extender's cache: its one state and lock, fed by the node and pod watches.

`cluster` (`ClusterCache`, the one owner of the state and the facade over its parts), `parts`
(the state and its lock, as the cache's roles share them) and `intake` (watch events applied and
rebuilds from a listing). The read-only view of the ledger that other modules get is
`vgpu.extender.ledger_view`, below both the cache and the gang coordinator, which use it. The
other parts the cache calls under its lock (the node table, the pod book, the bind holds, the
gang coordinator) live beside it in the extender.
"""
