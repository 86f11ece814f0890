"""Node-side pure logic: GPU value types, health policy, labels, inventory, device IDs, grants.

Nothing here does I/O or imports gRPC, protobuf, NVML or Kubernetes clients; the adapters in
`vgpu.adapters` feed these functions and translate their results onto the wire.
"""
