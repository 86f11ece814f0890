"""I/O edges: GPU backends (NVML, fake), the kubelet device-plugin gRPC server, the Kubernetes API."""
