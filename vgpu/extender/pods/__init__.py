"""Pods in the extender: the cache's pod book, and each pod read and placed one way.

`book` (the cache's pod book: every watched pod, what it holds in the ledger, pending containers
per node, gang members, pods that cannot be read), `parser` (a pod object read into a `PodSpec`
with the extender's memory unit and resource names), `memo` (a pod parsed and applied once per
content, not once per version) and `place` (where a read pod goes on a given node, shared by the
cache, the filter and the bind so that they agree).
"""
