"""The kube-scheduler extender: filter, prioritize and bind pods onto shared GPUs.

Wire JSON (`wire`), the watched nodes as the scheduler counts them (`node_table`; a Node and a pod
are read by `vgpu.api.nodespec` and `vgpu.api.podspec`), the watch-fed cache (`cache`: the one
owner of the extender's state and lock, with its pod book, `pods`, and its gang coordination,
`gangs`, all three packages), one reading of a request's pod (`resolve`), the verbs (`service`,
`binder`, `preemption`), the table of verbs the server answers (`routes`) and metrics (`metrics`);
the HTTP/1.1, HTTP/2 and TLS server is the `server` package. The leader's queue pass and the loop
that runs it, with the records it carries on its Lease, are the `queues` package (the gangs it
releases are recorded by `gangs.record`). The composition root is `vgpu.daemons.extender.daemon`.
"""
