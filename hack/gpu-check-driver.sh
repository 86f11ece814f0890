#!/usr/bin/env bash
# The driver memory backend on a real GPU (docs/isolation.md, "Driver memory limits"); run by
# hack/gpu-check.sh, or alone as root. Where the driver is older than r615 or cgroup v2 is not
# mounted it reports "not available: driver X, kernel Y, cgroup vN" and exits 0. Otherwise, in a
# fresh cgroup under /sys/fs/cgroup with a 2 GiB hard limit set through NVML (the agent's own
# adapter, vgpu.adapters.dmem), a program WITHOUT the interposer allocates 256 MiB twelve times:
# the driver must refuse before the limit is passed, NVML must read the limit back, and the same
# program outside the cgroup must get all twelve. nvidia-smi memory-limits' output is recorded.
# The report (JSON) goes to stdout and $VGPU_CHECK_DRIVER_OUT (default ./gpu-check-driver.json).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${PYTHON:-python3}"
out="${VGPU_CHECK_DRIVER_OUT:-gpu-check-driver.json}"
gpuspin="${1:-}"
cgroupfs=/sys/fs/cgroup

driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0 | tr -d ' ')"
kernel="$(uname -r)"
if [[ -f "$cgroupfs/cgroup.controllers" ]]; then cgroup=2; else cgroup=1; fi
if ((${driver%%.*} < 615)) || [[ "$cgroup" != 2 ]]; then
    line="not available: driver $driver, kernel $kernel, cgroup v$cgroup"
    printf '{"driver_backend": "%s"}\n' "$line" | tee "$out"
    exit 0
fi

work="$(mktemp -d)"
group="$cgroupfs/vgpu-gpu-check-$$"
cleanup() {
    rmdir "$group" 2>/dev/null || true # removing the cgroup clears its limits (NVML reference)
    rm -rf "$work"
}
trap cleanup EXIT
if [[ -z "$gpuspin" ]]; then
    gpuspin="$work/gpuspin"
    "${CC:-cc}" -O2 -Wall -Wextra -Werror -o "$gpuspin" tests/isolation/programs/gpuspin.c -lcuda
fi
uuid="$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')"
if grep -qw dmem "$cgroupfs/cgroup.controllers"; then
    echo +dmem >"$cgroupfs/cgroup.subtree_control" || true
fi
mkdir "$group"
limit=$((2 << 30))
"$python" - "$uuid" "$group" "$limit" >"$work/nvml.json" <<'PY'
import json, sys
from pathlib import Path
from vgpu.adapters.dmem import NvmlLimits
uuid, group, limit = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
nvml = NvmlLimits()
nvml.set(uuid, group, hard=limit)
soft, hard, used = nvml.get(uuid, group)
print(json.dumps({"soft": soft, "hard": hard, "used": used}))
PY
nvidia-smi memory-limits >"$work/smi.txt" 2>&1 || true
bash -c 'echo $$ >"$0/cgroup.procs" && exec "$1" mem 268435456 12' "$group" "$gpuspin" \
    >"$work/inside.json"
"$gpuspin" mem 268435456 12 >"$work/outside.json"
dmem_max="$(cat "$group/dmem.max" 2>/dev/null || echo "(no dmem.max)")"

"$python" - "$work" "$out" "$limit" "$driver" "$kernel" "$dmem_max" <<'PY'
import json, pathlib, sys

work, out, limit = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
read = lambda name: json.loads((work / f"{name}.json").read_text())
inside, outside, nvml = read("inside"), read("outside"), read("nvml")
taken = inside["codes"].count(0) * 256 << 20
checks = [
    {"check": "refused past the hard limit without the interposer", "codes": inside["codes"],
     "pass": 2 in inside["codes"] and taken <= limit},
    {"check": "NVML reads the hard limit back", "nvml": nvml, "pass": nvml["hard"] == limit},
    {"check": "the same program outside the cgroup is not limited", "codes": outside["codes"],
     "pass": outside["codes"] == [0] * 12},
]
report = {"driver": sys.argv[4], "kernel": sys.argv[5], "dmem.max": sys.argv[6],
          "cuMemGetInfo_total_inside": inside["total"],
          "nvidia_smi_memory_limits": (work / "smi.txt").read_text()[-2000:],
          "checks": checks, "pass": all(c["pass"] for c in checks)}
out.write_text(json.dumps(report, indent=2) + "\n")
print(json.dumps(report, indent=2))
sys.exit(0 if report["pass"] else 1)
PY
