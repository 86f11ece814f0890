"""Print a Markdown table from `vgpu simulate --json` outputs, one row per file.

    for v in cpu050 cpu100 gpushare20 gpushare40 gpuspec10 multigpu20; do
      vgpu simulate --pods TRACES/openb_pod_list_$v.csv --policy random --policy dotprod \\
        --policy gpuclustering --policy gpupacking --policy bestfit --policy fgd \\
        --seeds 42-51 --json --quiet > $v.json
    done
    python hack/sim_table.py cpu050.json cpu100.json ...

Each row is named after its file; each cell is the median allocation % at 100 % arrival.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(paths: list[str]) -> None:
    docs = {Path(p).stem.removeprefix("variant_"): json.loads(Path(p).read_text()) for p in paths}
    policies = list(dict.fromkeys(name for d in docs.values() for name in d["policies"]))
    print("| trace | " + " | ".join(policies) + " |")
    print("|---|" + "---:|" * len(policies))
    for name, doc in docs.items():
        cells = []
        values = {p: doc["policies"][p]["median_alloc_pct_at_100"] for p in doc["policies"]}
        best = max(values.values())
        for p in policies:
            v = values.get(p)
            cells.append("" if v is None else (f"**{v:.2f}**" if v == best else f"{v:.2f}"))
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
