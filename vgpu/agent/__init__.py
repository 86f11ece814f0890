"""The node agent: the kubelet device plugin's parts and the loops that keep them current.

`vgpu.agent.agent.NodeAgent` wires the parts (each a module here) over the pure node policy
(`vgpu.node`) and the I/O adapters (`vgpu.adapters`); `vgpu.daemons.node_agent.cli` is its command line.
"""
