"""`vgpu simulate`: replay the Alibaba GPU trace (or another) through the scheduling core.

With no arguments: the embedded openb trace, seed 42, the default policy beside the paper's
baselines, a readable table and progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from vgpu import __version__
from vgpu.cli.plots import check_plot_path, plot, plot_shares
from vgpu.cli.trace_files import read_lifetimes, read_trace, trace_files
from vgpu.core.errors import InvalidRequest
from vgpu.core.policy.specs import PAPER_POLICIES, POLICY_NAMES, PolicySpec, parse_policy
from vgpu.flags import HelpFormatter, count
from vgpu.sim.dra import DEVICE_CHOICES
from vgpu.sim.engine import RunResult, capacity_milli
from vgpu.sim.queues.render import as_json
from vgpu.sim.queues.render import table as queue_table
from vgpu.sim.queues.run import run as run_queued
from vgpu.sim.queues.settings import build
from vgpu.sim.report import table
from vgpu.sim.run_inputs import PLACEMENT_INPUTS, QUEUE_INPUTS, run_inputs
from vgpu.sim.runner import Job, default_workers, progress_printer, run_all, summary
from vgpu.sim.trace import Trace
from vgpu.sim.variants import VARIANTS
from vgpu.sim.workload import arrivals

DEFAULT_POLICIES = ("default", *PAPER_POLICIES)


def parse_seeds(text: str) -> list[int]:
    """Seeds as "42", "42-51" or "1,5,9-11"."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError
                seeds.extend(range(lo, hi + 1))
            elif part:
                seeds.append(int(part))
    except ValueError:
        raise InvalidRequest(
            "--seeds", f"{text!r} is not a seed list", 'use e.g. "42" or "42-51"'
        ) from None
    if not seeds:
        raise InvalidRequest("--seeds", "no seeds given", 'use e.g. "42-51"')
    return seeds


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `vgpu simulate`."""
    p = sub.add_parser(
        "simulate",
        help="replay a cluster trace through the scheduling core",
        formatter_class=HelpFormatter,
    )
    p.add_argument("--nodes", type=Path, help="node CSV (default: embedded openb GPU nodes)")
    p.add_argument("--pods", type=Path, help="pod CSV (default: embedded openb default trace)")
    p.add_argument(
        "--policy",
        action="append",
        metavar="NAME",
        help=f"policy to run (repeatable; default: {', '.join(DEFAULT_POLICIES)}); "
        f"one of {', '.join(POLICY_NAMES)}, or default:key=value,... (docs/policies.md)",
    )
    _add_scenario_flags(p)
    _add_run_flags(p)
    _add_queue_flags(p)
    p.set_defaults(run=run)


def _add_queue_flags(p: argparse.ArgumentParser) -> None:
    """A queued replay in time (docs/queues.md): Poisson arrivals per queue, pods that leave."""
    g = p.add_argument_group("queues (docs/queues.md)")
    g.add_argument(
        "--queues",
        metavar="A=1,B=3",
        help="replay in time with these queues and weights instead of the placement replay",
    )
    g.add_argument(
        "--queue-start",
        action="append",
        default=[],
        metavar="B=2h",
        help="when a queue starts sending pods (repeatable; default: at once)",
    )
    g.add_argument(
        "--load",
        type=float,
        default=1.5,
        help="per queue: arrival rate x mean pod core-time, in cluster cores",
    )
    g.add_argument("--reclaim", action="store_true", help="every queue may reclaim (default off)")
    g.add_argument(
        "--strict",
        action="append",
        default=[],
        metavar="B=10m",
        help="hold other queues back at most this long while a job of this queue does not fit "
        "below its share "
        "(repeatable; default: work-conserving)",
    )
    g.add_argument(
        "--fcfs",
        action="store_true",
        help="no queues: one global arrival order, as kube-scheduler alone (default off)",
    )
    g.add_argument(
        "--queue-large",
        metavar="A",
        help="this queue gets every pod asking a whole GPU or more, the others the fractional ones",
    )
    g.add_argument(
        "--queue-memory",
        metavar="A",
        help="this queue's fractional pods ask vgpu.io/memory, drawn as in --variant two-axis "
        "(a second dimension of the fair order that only it asks)",
    )
    g.add_argument("--measure", default="4h", help="how long to run after the last queue starts")
    g.add_argument("--min-runtime", default="5m", help="reclaim spares pods younger than this")
    g.add_argument("--max-duration", default="6h", help="pods run at most this long")
    g.add_argument(
        "--cluster-nodes",
        type=count,
        default=0,
        metavar="N",
        help="replay on N of the trace's GPU nodes, spread evenly (default 0: all)",
    )


def _add_scenario_flags(p: argparse.ArgumentParser) -> None:
    """What is replayed: the pods' variant, the policy's prior, gangs, who picks the GPUs."""
    p.add_argument(
        "--variant",
        choices=VARIANTS,
        default="none",
        help="synthetic variant of the pods: two-axis (GPU memory drawn independently of the "
        "compute share) or gangs (all-or-nothing groups of 2-16); seeded by --seeds",
    )
    p.add_argument(
        "--prior",
        choices=("auto", "none", "trace"),
        default="auto",
        help="what a policy that learns its workload online (default) knows in advance: "
        "nothing (auto, none) or the whole trace (trace); FGD always gets the trace",
    )
    p.add_argument(
        "--gang-mode",
        choices=("auto", "plan", "independent"),
        default="auto",
        help="with --variant gangs: plan gangs all-or-nothing, or place members one by one "
        "(auto: plan for default, independent for the others)",
    )
    p.add_argument(
        "--device-choice",
        action="append",
        choices=DEVICE_CHOICES,
        metavar="WHO",
        help="who picks the GPUs on the chosen node (repeatable; default extender): extender "
        "(the policy), dra (the DRA allocator's first fit in slice order) or dra-sorted (first "
        "fit in a slice kept fullest first); see docs/dra.md",
    )


def _add_run_flags(p: argparse.ArgumentParser) -> None:
    """How the replays run and what they print."""
    p.add_argument("--seeds", default="42", help='seeds, e.g. "42" or "42-51" (default 42)')
    p.add_argument(
        "--tune", type=float, default=1.3, help="inflate arrivals to this × GPU capacity"
    )
    p.add_argument("--jobs", type=count, default=0, help="parallel processes (default: CPUs)")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object instead of a table: the figures and the run's inputs "
        "(flags, seeds, policies, trace files' sha256, version); fields in docs/performance.md",
    )
    p.add_argument("--plot", metavar="FILE.png", help="draw allocation against arrived workload")
    p.add_argument(
        "--ties",
        choices=("policy", "random", "first"),
        default="policy",
        help="how equal top scores are broken (default: each policy's own rule)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> int:
    """Run the replays and print the results."""
    if args.queues is not None:
        return run_queues(args)
    policies = [parse_policy(p, "--policy") for p in args.policy or DEFAULT_POLICIES]
    if not 0 < args.tune <= 10:
        raise InvalidRequest("--tune", f"{args.tune} is out of range", "use a factor such as 1.3")
    seeds = parse_seeds(args.seeds)
    if args.plot:
        check_plot_path(args.plot)  # before the replays, not after them
    trace = read_trace(args.nodes, args.pods)
    choices = args.device_choice or ["extender"]
    if args.variant == "gangs" and choices != ["extender"]:
        raise InvalidRequest(
            "--device-choice", "gangs are planned by the extender", "drop --variant gangs"
        )
    jobs = [
        Job(policy, seed, args.tune, args.ties, args.variant, args.prior, args.gang_mode, who)
        for policy in policies
        for who in choices
        for seed in seeds
    ]
    workers = args.jobs if args.jobs > 0 else default_workers()
    if not args.quiet:
        print(describe(trace, args.tune, seeds[0], len(jobs), workers), file=sys.stderr)
    results = run_all(
        trace, jobs, workers=workers, on_done=None if args.quiet else progress_printer()
    )
    _output(args, results, _inputs(args, PLACEMENT_INPUTS, policies, seeds))
    return 0


def describe(trace: Trace, tune: float, seed: int, runs: int, workers: int) -> str:
    """What a run replays: the trace's pods are drawn (seeded) until `tune` x capacity arrived."""
    count = len(
        arrivals(trace.pods, capacity_milli=capacity_milli(trace.nodes), tune=tune, seed=seed)
    )
    return (
        f"trace: {len(trace.pods)} pods on {len(trace.nodes)} nodes; each run replays them "
        f"shuffled, plus copies drawn from them until the pods ask for {tune:g} x the "
        f"cluster's GPUs (--tune): {count} arrivals per run, each placed or failed; "
        f"{runs} run(s), {workers} process(es)"
    )


def trace_name(args: argparse.Namespace) -> str:
    """How the plot's title names the trace."""
    if args.nodes is None and args.pods is None:
        name = "openb default trace (embedded)"
    else:
        name = " + ".join(p.name for p in (args.nodes, args.pods) if p is not None)
    return name if args.variant == "none" else f"{name}, variant {args.variant}"


def _inputs(
    args: argparse.Namespace,
    names: frozenset[str],
    policies: list[PolicySpec],
    seeds: list[int],
) -> dict[str, object]:
    """The `--json` document's `inputs`, the same way for both modes: the flags of `names`."""
    return run_inputs(
        {k: v for k, v in vars(args).items() if k in names},
        seeds=seeds,
        policies=policies,
        trace=trace_files(args.nodes, args.pods),
        version=__version__,
    )


def _output(args: argparse.Namespace, results: list[RunResult], inputs: dict[str, object]) -> None:
    if args.plot:
        plot(results, args.plot, trace=f"{trace_name(args)}, --tune {args.tune:g}")
        print(f"wrote {args.plot}", file=sys.stderr)
    if args.json:
        print(json.dumps({"inputs": inputs, "policies": summary(results)}, indent=2))
    else:
        print(table(results, paper=args.variant == "none"))


def run_queues(args: argparse.Namespace) -> int:
    """`--queues`: one queued replay in time; a table, or `--json` with its inputs."""
    setup = build(
        args.queues,
        starts=args.queue_start,
        stricts=args.strict,
        reclaim=args.reclaim,
        large=args.queue_large,
        memory=args.queue_memory,
        fcfs=args.fcfs,
        load=args.load,
        measure=args.measure,
        min_runtime=args.min_runtime,
        max_duration=args.max_duration,
    )
    policies = [parse_policy(p, "--policy") for p in args.policy or ["default"]]
    seeds = parse_seeds(args.seeds)
    if len(policies) > 1 or len(seeds) > 1:
        raise InvalidRequest("--queues", "runs one policy and one seed", "give one of each")
    if args.cluster_nodes < 0:
        raise InvalidRequest("--cluster-nodes", f"{args.cluster_nodes}", "use 0 (all) or more")
    if args.plot:
        check_plot_path(args.plot)
    trace = read_trace(args.nodes, args.pods)
    result = run_queued(
        trace,
        read_lifetimes(args.pods),
        setup,
        policies[0],
        seed=seeds[0],
        node_count=args.cluster_nodes,
        progress=None if args.quiet else queue_progress(setup.end_s, args.cluster_nodes),
    )
    if args.plot:
        title = f"{trace_name(args)}: queues {args.queues}, load {args.load:g}, seed {seeds[0]}"
        plot_shares(result, args.plot, title=title + (", FCFS" if args.fcfs else ""))
        print(f"wrote {args.plot}", file=sys.stderr)
    if args.json:
        inputs = _inputs(args, QUEUE_INPUTS, policies, seeds)
        print(json.dumps(as_json(result, inputs), indent=2))
    else:
        print(queue_table(result))
    return 0


def queue_progress(end_s: float, nodes: int) -> Callable[[float], None]:
    """A `--queues` replay's progress on stderr: a first line saying what runs, then one line
    each time another tenth of the simulated time is done (a full-cluster run takes minutes of
    CPU, which once passed without a word)."""
    started = time.perf_counter()
    where = f"{nodes} nodes" if nodes else "every node of the trace"
    print(
        f"queues: replaying {end_s / 60:.0f} simulated minutes on {where}; progress below "
        "(--quiet: none)",
        file=sys.stderr,
    )
    shown = [0]

    def show(now: float) -> None:
        tenth = int(10 * now / end_s) if end_s > 0 else 10
        if tenth > shown[0]:
            shown[0] = tenth
            print(
                f"  simulated {now / 60:.0f} of {end_s / 60:.0f} min ({min(tenth, 10) * 10} %), "
                f"{time.perf_counter() - started:.0f} s",
                file=sys.stderr,
            )

    return show
