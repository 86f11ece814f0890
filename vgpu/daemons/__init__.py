"""Composition roots: wiring, lifecycle, signals and graceful stop of the vgpu daemons."""
