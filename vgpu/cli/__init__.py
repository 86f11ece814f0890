"""Console entry points: `vgpu` and its subcommands."""
