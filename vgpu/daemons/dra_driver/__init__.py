"""`vgpu dra-driver`: its command line (`cli`), the driver (`driver`) and the ResourceSlice
keeper it runs (`slices`)."""
