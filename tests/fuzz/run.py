"""Run one fuzz target under atheris (libFuzzer flags pass through):

    python -m tests.fuzz.run quantity -max_total_time=600 [CORPUS_DIR]

Without a corpus directory the target's seeds are written to a temporary one. Exits non-zero
with the crashing input saved (crash-*) when a target fails.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["vgpu"]):
    from tests.fuzz.targets import SEEDS, TARGETS


def main() -> None:
    name, *flags = sys.argv[1:]
    if not any(not f.startswith("-") for f in flags):
        corpus = Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-"))
        for i, seed in enumerate(SEEDS[name]):
            (corpus / f"seed-{i}").write_bytes(seed)
        flags.append(str(corpus))
    atheris.Setup([sys.argv[0], *flags], TARGETS[name])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
