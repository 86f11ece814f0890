"""Composition roots: the commands that wire adapters, the cluster contract and the pure logic
into running processes; no package below them imports them (`.importlinter`).

One folder per daemon: `extender` (`vgpu extender`: its command line `cli` and the process
`daemon`), `node_agent` (the command line of `vgpu node-agent`; the agent itself is
`vgpu.agent`) and `dra_driver` (`vgpu dra-driver`: `cli`, the driver `driver` and its
ResourceSlice keeper `slices`); `flags` holds what two of them parse alike: the assignment key
(`keys`), the GPU source (`gpu`) and the enforcement mode (`mode`).
"""
