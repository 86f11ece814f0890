"""The pure scheduling core of vgpu.

Everything here is plain, typed, synchronous Python: no sockets, files, clocks, randomness or
environment (those are injected). The extender, the device plugin and the simulator all call these
modules, so a decision made in one place is the decision made everywhere. The import contract in
`.importlinter` (checked in CI) forbids gRPC, protobuf, Kubernetes, NVML, Prometheus and HTTP
servers here.
"""
