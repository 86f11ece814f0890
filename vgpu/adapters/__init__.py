"""I/O edges: GPU backends (NVML, fake) and the kubelet device-plugin gRPC server."""
