"""The node agent's elastic duty as a child process on a simulated node, reading the stand-in's
NVML through pynvml exactly as the agent does (the test process itself loads no NVML).

    python -m tests.isolation.elastic_agent STATE_DIR CORRECT_S

prints `ready` once NVML answers, then steps every refill period until its stdin closes."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from vgpu.adapters.container_dirs import ContainerDirs
from vgpu.adapters.gpu_utilisation import nvml_utilisation
from vgpu.agent.elastic import ElasticDuty, run_elastic


def main() -> int:
    state, correct_s = Path(sys.argv[1]), float(sys.argv[2])
    source = nvml_utilisation()
    if source is None:
        print("NVML unavailable", flush=True)
        return 2
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
