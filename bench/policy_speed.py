"""Seconds per replay of `default` against `fgd`, interleaved so both see the same machine load.

    python bench/policy_speed.py [--pods CSV] [--seeds 42-44] [--variant none|two-axis]

For each seed, runs fgd then default (then fgd and default again in the other order, to cancel
drift in background load) in this one process, and prints each policy's mean seconds per run and
the ratio default/fgd. The target is a ratio of at most 1.5 (docs/research/policies.md, Speed).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from statistics import mean

from vgpu.cli.simulate import parse_seeds
from vgpu.cli.trace_files import read_trace
from vgpu.core.policy.specs import parse_policy
from vgpu.sim.runner import Job, run_job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=Path)
    parser.add_argument("--seeds", default="42-43")
    parser.add_argument("--variant", default="none", choices=("none", "two-axis"))
    args = parser.parse_args()
    trace = read_trace(None, args.pods)
    seconds: dict[str, list[float]] = {"fgd": [], "default": []}
    for seed in parse_seeds(args.seeds):
        for order in (("fgd", "default"), ("default", "fgd")):
            for name in order:
                result = run_job(trace, Job(parse_policy(name), seed, 1.3, variant=args.variant))
                seconds[name].append(result.seconds)
                print(f"seed {seed} {name}: {result.seconds:.1f} s", flush=True)
    fgd, default = mean(seconds["fgd"]), mean(seconds["default"])
    print(f"fgd {fgd:.1f} s/run, default {default:.1f} s/run, ratio {default / fgd:.2f}")


if __name__ == "__main__":
    main()
