"""Flags two daemons parse alike, parsed once: the assignment key (`keys`: the extender and
the node agent), the GPU source (`gpu`), the enforcement mode (`mode`), the driver's memory limits
(`driver`) and a GPU node's identity and health (`node`: the node agent and the DRA driver)."""
