"""`vgpu extender`: its command line (`cli`) and the process it starts (`daemon`)."""
