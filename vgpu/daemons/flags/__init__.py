"""Flags two daemons parse alike, parsed once: the assignment key (`keys`: the extender and
the node agent), the GPU source (`gpu`) and the enforcement mode (`mode`: the node agent and
the DRA driver)."""
