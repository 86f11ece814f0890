"""The cluster contract: the names and formats two components agree on, (de)serialised with no
I/O (the generated kubelet gRPC code is an adapter's: `vgpu.adapters._proto`)."""
