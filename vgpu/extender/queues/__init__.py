"""Queues in the extender: the leader's release pass and the loop that runs it.

`release_pass` (`QueueIndex`, the queued pods read from the pod watch, and `decide`, one pass:
which held pods to release, which to evict), `cache_view` (`QueueCache` and `QueueParts`: what the
pass may use of the extender, as the gang parts see the cache through `GangCache`),
`release_loop` (`QueueReleaser`: the leader's loop, doing the API work outside the cache's lock),
`strict_holds` (the strict holds and reclaim targets carried on the leader Lease) and
`collector` (the per-queue metrics, read from the last pass).
"""
