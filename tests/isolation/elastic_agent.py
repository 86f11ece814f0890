"""The node agent's elastic duty as a child process on a simulated node, reading the stand-in's
NVML through pynvml exactly as the agent does (the test process itself loads no NVML).

    python -m tests.isolation.elastic_agent STATE_DIR CORRECT_S|off

prints `ready` once NVML answers, then steps every refill period until its stdin closes; `off`
runs the duty without its utilisation source (every scale neutral: the agent as it was before
the outer loop, for bench/contention.py's baseline)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from vgpu.adapters.container_dirs import ContainerDirs
from vgpu.adapters.gpu_utilisation import nvml_utilisation
from vgpu.agent.elastic import ElasticDuty, run_elastic


def main() -> int:
    state, off = Path(sys.argv[1]), sys.argv[2] == "off"
    source = None if off else nvml_utilisation()
    if source is None and not off:
        print("NVML unavailable", flush=True)
        return 2
    correct_s = 0.0 if off else float(sys.argv[2])
    dirs = ContainerDirs(state)
    duty = ElasticDuty(dirs, state / "checkpoint", utilisation=source, correct_s=correct_s)
    stop = threading.Event()

    def until_stdin_closes() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=until_stdin_closes, daemon=True).start()
    print("ready", flush=True)
    run_elastic(duty, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
