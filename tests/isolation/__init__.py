"""CPU-only isolation tier: stand-in driver libraries, the interposer, sandboxes."""
