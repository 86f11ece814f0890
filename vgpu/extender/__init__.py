"""The kube-scheduler extender: filter, prioritize and bind pods onto shared GPUs.

Wire JSON (`wire`), Kubernetes-object translation (`podspec`, `nodespec`; quantities are
`vgpu.api.quantity`), the
watch-fed cache (`cache`), gang coordination (`gangs`), the verbs (`service`, `binder`), the HTTP
server (`http`) and metrics (`metrics`). The composition root is `vgpu.daemons.extender`.
"""
