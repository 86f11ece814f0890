"""The kube-scheduler extender: filter, prioritize and bind pods onto shared GPUs.

Wire JSON (`wire`), Kubernetes-object translation (`podspec`, `nodespec`, over `vgpu.api`), the
watch-fed cache (`cache`: the one owner of the extender's state and lock, with its gang
coordination, `gangs`), one reading of a request's pod (`resolve`), the verbs (`service`,
`binder`, `preemption`), the table of verbs the server answers (`routes`) and metrics (`metrics`); the HTTP/1.1,
HTTP/2 and TLS server is the `server` package. The composition root is `vgpu.daemons.extender.daemon`.
"""
