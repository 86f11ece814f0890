"""`vgpu simulate`: replay a cluster trace through the same scheduling core as the extender.

Pure apart from reading the trace files; imports only `vgpu.core` (checked by the import contract).
"""
