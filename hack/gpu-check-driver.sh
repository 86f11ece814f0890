#!/usr/bin/env bash
# The driver memory backend on a real GPU (docs/isolation.md, "Driver memory limits"); run by
# hack/gpu-check.sh, or alone as root. Where the node lacks what the backend needs it reports
# "not available: driver X, kernel Y, cgroup vN" and why (a driver older than r615, no cgroup v2,
# GPU 0 in MIG mode, an NVML without nvmlDeviceSetMemoryLimits_v1, no cgroup can be made) and
# exits 0. Otherwise, in a fresh cgroup under /sys/fs/cgroup with a 2 GiB hard limit set through
# NVML (the agent's own adapter, vgpu.adapters.dmem), a program WITHOUT the interposer allocates
# 256 MiB twelve times: the driver must refuse before the limit is passed, NVML must read the
# limit back, and the same program outside the cgroup must get all twelve. A step that fails
# fails its checks, naming the error; the report is still written. nvidia-smi memory-limits'
# output is recorded, with whether it names the cgroup.
# The report (JSON) goes to stdout and $VGPU_CHECK_DRIVER_OUT (default ./gpu-check-driver.json).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${PYTHON:-python3}"
out="${VGPU_CHECK_DRIVER_OUT:-gpu-check-driver.json}"
gpuspin="${1:-}"
cgroupfs="${VGPU_CHECK_CGROUPFS:-/sys/fs/cgroup}"

driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0 | tr -d ' ')"
kernel="$(uname -r)"
if [[ -f "$cgroupfs/cgroup.controllers" ]]; then cgroup=2; else cgroup=1; fi
not_available() {
    local line="not available: driver $driver, kernel $kernel, cgroup v$cgroup${1:+: $1}"
    "$python" -c 'import json, sys; print(json.dumps({"driver_backend": sys.argv[1]}))' \
        "$line" | tee "$out"
    exit 0
}
if ((${driver%%.*} < 615)) || [[ "$cgroup" != 2 ]]; then
    not_available ""
fi
mig="$(nvidia-smi --query-gpu=mig.mode.current --format=csv,noheader -i 0 | tr -d ' ' || true)"
if [[ "$mig" == Enabled ]]; then
    not_available "GPU 0 is in MIG mode (the driver's limits do not apply to MIG instances)"
fi
if ! nvml_error="$("$python" -c '
from vgpu.adapters.dmem import LimitError, NvmlLimits
try:
    ok = NvmlLimits().available
except LimitError as e:
    raise SystemExit(str(e))
raise SystemExit(0 if ok else "NVML lacks nvmlDeviceSetMemoryLimits_v1")
' 2>&1)"; then
    not_available "${nvml_error##*$'\n'}"
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
if ! made="$(mkdir "$group" 2>&1)"; then
    not_available "cannot make a cgroup under $cgroupfs: $made"
fi
limit=$((2 << 30))
"$python" - "$uuid" "$group" "$limit" >"$work/nvml.json" <<'PY' || true
import json, sys
from pathlib import Path
from vgpu.adapters.dmem import LimitError, NvmlLimits
uuid, group, limit = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
try:
    nvml = NvmlLimits()
    nvml.set(uuid, group, hard=limit)
    soft, hard, used = nvml.get(uuid, group)
except LimitError as e:
    print(json.dumps({"error": str(e)}))
    raise SystemExit(1)
print(json.dumps({"soft": soft, "hard": hard, "used": used}))
PY
nvidia-smi memory-limits >"$work/smi.txt" 2>&1 || true
bash -c 'echo $$ >"$0/cgroup.procs" && exec "$1" mem 268435456 12' "$group" "$gpuspin" \
    >"$work/inside.json" 2>"$work/inside.err" || true
"$gpuspin" mem 268435456 12 >"$work/outside.json" 2>"$work/outside.err" || true
dmem_max="$(cat "$group/dmem.max" 2>/dev/null || echo "(no dmem.max)")"

"$python" - "$work" "$out" "$limit" "$driver" "$kernel" "$dmem_max" "$group" <<'PY'
import json, pathlib, sys

work, out, limit = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
group = sys.argv[7]


def read(name):
    """A step's JSON, or its error (a program that stopped, an NVML call refused)."""
    try:
        return json.loads((work / f"{name}.json").read_text())
    except (OSError, ValueError):
        err = work / f"{name}.err"
        return {"error": (err.read_text()[-500:] if err.exists() else "no output") or "failed"}


inside, outside, nvml = read("inside"), read("outside"), read("nvml")
codes_in, codes_out = inside.get("codes", []), outside.get("codes", [])
taken = codes_in.count(0) * 256 << 20
smi = (work / "smi.txt").read_text() if (work / "smi.txt").exists() else ""
checks = [
    {"check": "refused past the hard limit without the interposer", "codes": codes_in,
     "error": inside.get("error"), "pass": 2 in codes_in and taken <= limit},
    {"check": "NVML reads the hard limit back", "nvml": nvml, "pass": nvml.get("hard") == limit},
    {"check": "the same program outside the cgroup is not limited", "codes": codes_out,
     "error": outside.get("error"), "pass": codes_out == [0] * 12},
]
informational = [
    {"check": "nvidia-smi memory-limits names the cgroup",
     "pass": pathlib.Path(group).name in smi},
]
report = {"driver": sys.argv[4], "kernel": sys.argv[5], "dmem.max": sys.argv[6],
          "cuMemGetInfo_total_inside": inside.get("total"),
          "nvidia_smi_memory_limits": smi[-2000:],
          "checks": checks, "informational": informational,
          "pass": all(c["pass"] for c in checks)}
out.write_text(json.dumps(report, indent=2) + "\n")
print(json.dumps(report, indent=2))
sys.exit(0 if report["pass"] else 1)
PY
