"""Test suite for vgpu (a package so helpers import as ``tests.<pkg>``)."""
