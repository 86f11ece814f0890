"""The queued replay behind `vgpu simulate --queues`: fair queues over Poisson arrivals, in time.

`settings` (`QueueSetup`: the queues, when each starts, the load, from the flags, each bad flag
refused in one line), `replay` (`QueuedReplay`: pods arrive, wait, are released by the core's
`release.plan`, run and leave, with reclaim), `run` (one replay from the flags to its figures:
`QueueResult`) and `render` (a table per queue and the `--json` document). The arrivals
(`vgpu.sim.poisson`) and the fairness figures (`vgpu.sim.fairness`) stay beside the package.
"""
