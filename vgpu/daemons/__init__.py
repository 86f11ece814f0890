"""Composition roots: wiring adapters and the core into long-running daemons (extender, node agent)."""
