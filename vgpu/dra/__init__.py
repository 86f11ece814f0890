"""DRA mode, node side: the ResourceSlice a node publishes, claim preparation, the checkpoint.

Pure logic only (no gRPC, Kubernetes client or file system beyond what callers pass in); the
kubelet-facing servers live in `vgpu.adapters.draplugin` and the wiring in
`vgpu.daemons.dra_driver.driver`.
"""
