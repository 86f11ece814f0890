#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: discover GPUs through NVML, run the device plugin against the
# stand-in kubelet, then run the NVML-marked tests. Extra arguments go to hack/gpu_check.py
# (e.g. --fake 2xT4 to try it without a GPU).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${PYTHON:-python3}"
"$python" hack/gpu_check.py --seconds 1 "$@"
"$python" -m pytest -q -m nvml tests/node
