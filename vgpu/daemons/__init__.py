"""Composition roots: wiring, lifecycle and graceful stop for vgpu's long-running processes."""
