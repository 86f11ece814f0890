"""The pure scheduling core: stdlib only, no I/O (see .importlinter)."""
