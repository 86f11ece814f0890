"""Composition roots: the commands that wire adapters, the cluster contract and the pure logic
into running processes; no package below them imports them (`.importlinter`).

`vgpu extender` (`extender_cli`, `extender`, with the leader's queue release and strict holds),
the command line of `vgpu node-agent` (`node_cli`; the agent itself is `vgpu.agent`) and
`vgpu dra-driver` (`dra_cli`, `dra_driver`, `dra_slice`), plus what two of them share: the
assignment key (`keys`), the GPU source and enforcement flags (`gpu_flags`, `mode_flags`).
"""
