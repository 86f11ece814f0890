"""I/O edges: thin translators between third-party libraries and vgpu's own types and errors."""
