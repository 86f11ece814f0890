"""hack/gpu_check.py end to end with a fake GPU: discovery, plugin, stand-in kubelet, SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_gpu_check_with_fake_gpus_stops_cleanly_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "hack/gpu_check.py"), "--fake", "1xA10,1xT4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.strip() == "ready":
            break
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=15)
    output = "".join(lines) + rest
    assert proc.returncode == 0, output
    assert '"vgpu.io/gpu.mixed": "true"' in output
    assert "registered vgpu.io/cores: 200 devices" in output
    assert "'VGPU_CORES': '50'" in output
    assert "received SIGTERM" in output
    assert "stopped; sockets left: []" in output
