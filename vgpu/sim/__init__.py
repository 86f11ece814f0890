"""The simulator behind `vgpu simulate`: cluster traces replayed through the scheduling core the
extender runs (`vgpu.core`): the same policy code places the pods in both.

Besides the plain replay of a trace (`runner`, `engine`): its variants and gangs (`variants`,
`gangs`), the in-tree DRA allocator's device choice for comparison (`dra`), and fair queues over
Poisson arrivals with reclaim (`--queues`: the package `queues`, over `poisson` and `fairness`).

Pure: no file, network or cluster I/O. The command line reads the trace files
(`vgpu.cli.trace_files`) and hands their text to `trace`. Of vgpu it imports `vgpu.core` alone;
the import contracts (`.importlinter`) keep I/O libraries and the daemons' packages out.
"""
