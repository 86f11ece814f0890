"""CPU the extender's thread spends per Binding POST: the lean path against the client's.

    python bench/bind_client.py [--binds 400]

Binds pods of the fake API server (in this process, plain HTTP) with `KubeApi.bind_pod`, once
through the lean kept-alive POST (`vgpu.adapters.kube.fast_post`) and once through the official
client's request layer (`vgpu.adapters.kube.request`), and prints the calling thread's CPU time
per bind (`time.thread_time`, so the fake server's own work is not counted) and the wall time.
TLS would add the same cost to both. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.kubeapi.server import FakeApiServer
from vgpu.adapters.kube.calls import KubeApi

NS = "default"
ASSIGNMENT = {"vgpu.io/assignment": "x" * 300, "vgpu.io/assignment-signature": "y" * 64}


def _bind_all(api: KubeApi, uids: dict[str, str], names: list[str]) -> tuple[float, float]:
    """Microseconds of thread CPU and of wall time per bind."""
    cpu, wall = time.thread_time(), time.perf_counter()
    for name in names:
        api.bind_pod(NS, name, "n1", annotations=ASSIGNMENT, uid=uids[name])
    count = len(names)
    return (time.thread_time() - cpu) / count * 1e6, (time.perf_counter() - wall) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--binds", type=int, default=400)
    args = parser.parse_args()
    with FakeApiServer() as server:
        for i in range(2 * args.binds):
            pod = {
                "kind": "Pod",
                "apiVersion": "v1",
                "metadata": {"name": f"p{i}", "namespace": NS},
            }
            server.store.put({**pod, "spec": {"containers": [{"name": "c", "image": "i"}]}})
        lean = KubeApi(server.api_client())
        client = KubeApi(server.api_client())
        client._poster = None  # the official client's request layer
        uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in lean.list_pods(NS).items}
        names = sorted(uids, key=lambda n: int(n[1:]))
        _bind_all(lean, uids, names[:20])  # warm both connections up
        _bind_all(client, uids, names[20:40])
        half = args.binds
        for label, api, batch in (
            ("lean POST (fast_post)", lean, names[40 : half + 20]),
            ("kubernetes client", client, names[half + 20 :]),
        ):
            cpu, wall = _bind_all(api, uids, batch)
            print(
                f"{label:22} {cpu:6.0f} µs CPU per bind, {wall:6.0f} µs wall ({len(batch)} binds)"
            )
        lean.close()
        client.close()


if __name__ == "__main__":
    main()
