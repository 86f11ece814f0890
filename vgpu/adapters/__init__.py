"""I/O edges: thin translators between third-party libraries (GPU backends, kubelet gRPC,
Kubernetes API) and vgpu's own types and errors."""
