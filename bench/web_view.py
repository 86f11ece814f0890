"""The web view's first page on a large cluster: 1,000 nodes x 8 GPUs in headless Chromium.

    python bench/web_view.py [--nodes 1000] [--gpus 8] [--repeat 5]

Saves the snapshot `bench/inspect_report.py` builds (8 pods per node, some sharing a GPU, one
pending two-GPU pod), serves it with `vgpu inspect --serve --fake-cluster` in a separate process,
and loads `/` in a fresh headless Debian Chromium (the flags of `tests/web/browser.py`) --repeat
times. Prints, median of the loads: the server's time to answer the page (the browser's
`responseStart - requestStart`), the time to the page's `load` event from the navigation's start
(HTML, stylesheet and script fetched, the grid laid out), and the page weight (the bytes of the
HTML, stylesheet and script as sent). Target: under 1 s to `load` for 1,000 x 8.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.inspect_report import cluster
from tests.web.browser import chromium, serving
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.inspect.snapshot import dumps

TIMING = """
const n = performance.getEntriesByType("navigation")[0];
const r = performance.getEntriesByType("resource");
return [n.responseStart - n.requestStart, n.loadEventEnd - n.startTime,
        n.encodedBodySize + r.reduce((s, e) => s + e.encodedBodySize, 0),
        document.querySelectorAll("#grid a.gpu").length];
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot.json"
        path.write_text(dumps(cluster(args.nodes, args.gpus), as_json=True, names=DEFAULT_NAMES))
        runs = []
        with serving(path) as url, chromium() as browser:
            for _ in range(args.repeat):
                browser.get("about:blank")
                browser.get(url + "/")
                browser.execute_script("return document.readyState")
                runs.append(browser.execute_script(TIMING))
    server, load, weight, cells = (statistics.median(r[i] for r in runs) for i in range(4))
    print(
        f"{args.nodes} nodes x {args.gpus} GPUs, first page ({int(cells)} GPU cells): server "
        f"{server:.0f} ms, load {load:.0f} ms, weight {weight / 1024:.0f} KiB "
        f"(median of {args.repeat})"
    )


if __name__ == "__main__":
    main()
