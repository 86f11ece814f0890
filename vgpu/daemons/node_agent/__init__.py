"""`vgpu node-agent`: its command line (`cli`); the agent it starts is `vgpu.agent`."""
