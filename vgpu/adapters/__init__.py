"""I/O edges: thin translators between third-party libraries (NVML, gRPC/kubelet, Kubernetes) and vgpu's own types and errors."""
