"""I/O edges: thin translators between third-party libraries (GPU backends, kubelet gRPC,
Kubernetes API) and vgpu's own types and errors.

Importing this package defers the eager `__init__` bodies of the `kubernetes` client packages
(`vgpu.adapters.kube.client_import`: it saves ~10 MiB per process and changes no behaviour). It
happens here, before any adapter module runs, so every `from kubernetes... import` below sees it."""

from vgpu.adapters.kube.client_import import defer_kubernetes_init

defer_kubernetes_init()
