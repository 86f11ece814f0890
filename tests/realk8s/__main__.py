"""`python -m tests.realk8s up|down DIR`: the test cluster by hand (hack/testcluster.sh wraps it).

`up` builds hack/testcluster, starts the cluster in DIR and returns, leaving it running (with
`--chart`, set up by the Helm chart: `tests.realk8s.chart_install`); DIR/cluster.json
names the API server, the kubeconfigs (admin and each vgpu service account) and the logs.
`down` ends the processes `up` recorded in DIR/pids.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tests.realk8s.binary import Unavailable, build
from tests.realk8s.cluster import NodeSpec, RealCluster
from tests.realk8s.processes import Processes


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hack/testcluster.sh")
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("dir", type=Path, help="cluster directory (keep it short: unix sockets)")
    parser.add_argument(
        "--nodes",
        default="node-a:4xA100-SXM4-80GB,node-b:4xA100-SXM4-80GB",
        help="NAME:FAKE_GPUS,... (default: two nodes of four A100s)",
    )
    parser.add_argument(
        "--chart",
        action="store_true",
        help="vgpu's objects from `helm install` of charts/vgpu (queues on, agents' metrics "
        "open), so Helm's dry runs, upgrades and the chart's queue objects work against it",
    )
    args = parser.parse_args(argv)
    if args.action == "down":
        stopped = Processes.stop_recorded(args.dir)
        print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        return 0
    try:
        binary, seconds = build()
    except Unavailable as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"built {binary.name} in {seconds:.1f}s", file=sys.stderr)
    nodes = [NodeSpec(*item.split(":", 1)) for item in args.nodes.split(",")]
    args.dir.mkdir(parents=True, exist_ok=True)
    cluster = RealCluster(args.dir.resolve(), binary, nodes, chart=args.chart)
    try:
        cluster.up()
    except Exception as err:
        cluster.down()
        print(f"error: the test cluster did not start: {err}", file=sys.stderr)
        return 1
    print(json.dumps(cluster.describe(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
