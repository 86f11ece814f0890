#!/usr/bin/env bash
# On a machine with an NVIDIA GPU (as root; about 2 minutes of checks plus builds, well inside 10):
#  1. vgpu-core on the hardware: hand-written PTX kernels JIT-compiled by the driver (no nvcc;
#     tests/isolation/programs/gpuspin.c and gpumem.c, whose driver prototypes are declared in
#     tests/isolation/programs/cudrv.h, no vendor header; they run in CI on the stand-in too)
#     run in "containers" made with unshare -m (limits and shared directories mounted at /run/vgpu and /run/vgpu-shared, the
#     library preloaded). Nothing is downloaded: the driver's libraries, cc and what the
#     checkout builds. Checks, each pass/fail, as JSON on stdout and in $VGPU_CHECK_OUT (default
#     ./gpu-check.json; a program that stops on a driver error, a PTX the JIT rejects say, fails
#     the checks that read it, named with its call and code, and the rest still run and report;
#     steps 2 and 3 run too, and the script's status is the report's): memory grant exact,
#     cores 25/50/75 within +-8 points, 30 and 60 side by side at 0.5 +- 0.1, overhead <= 2 %
#     with no limit, and a CUDA graph captured in the global capture mode under 30 cores (the
#     capture succeeds, its launches within +-8 points); then
#     - the cudaDeviceReset sequence: cuDevicePrimaryCtxReset, the context retained again, and
#       30 cores still hold within +-8 points;
#     - VMM map-then-release (NVIDIA's sample pattern): a second cuMemCreate past a 1 GiB grant
#       is refused while the first, released, stays mapped; after the unmap it fits again;
#     - a graph memory node (cuGraphAddMemAllocNode) past the grant is refused beside one that
#       fits; so is a cuMemAllocAsync captured into a graph (global mode) past the grant, at
#       capture, and the capture still ends;
#     - shared VMM memory (exported as a POSIX file descriptor, imported and mapped by a second
#       process): it stays counted while the importer holds it after the exporter released and
#       unmapped it, the import is not counted twice, and the report says whether the driver's
#       descriptor is a regular file of its own (what vgpu-core identifies shared memory by);
#     - legacy IPC memory (cuIpcGetMemHandle, opened by a second process): it stays counted while
#       the importer holds it open after the exporter's cuMemFree, and cuMemGetAddressRange_v2
#       reports the opened allocation's size and cuPointerGetAttribute its GPU (what an import
#       from another container is charged by); run bare too, the report says whether the driver itself kept the memory;
#     - context limits (cuCtxSetLimit, what cudaDeviceSetLimit calls): a malloc heap past a 1 GiB
#       grant is refused, a 1 KiB raise of the per-thread stack is charged and given back when
#       lowered; run bare too, the report says what the driver itself reserved for that raise
#       (vgpu-core charges an estimate, per-thread size x resident threads);
#     - totalGlobalMem as the CUDA runtime reports it: the runtime is not on the machine (nothing
#       is downloaded), so the check reads what cudaGetDeviceProperties takes it from, the
#       driver's cuDeviceTotalMem_v2, called directly and through cuGetProcAddress at CUDA 12.0
#       (how the runtime reaches the driver), beside cuMemGetInfo_v2: all equal the grant while
#       the same call without the library reports the GPU's own size (no cuDeviceGetAttribute
#       reports memory size, so none is read);
#     - the CPU time a launch takes inside cuLaunchKernel under a 50 % cores limit (every launch
#       measured with events: two records, the queries of settled launches, capture status),
#       beside the same without the library, 1 us kernels paced so that none is held back;
#     - a 30 % share on eight streams at once (vgpu-core charges the time their spans overlap
#       once; whether cuEventElapsedTime answers a negative time when its second event came first,
#       which the interposer relies on and NVIDIA's reference does not say, shows here: an error
#       or 0 would charge each span whole, and the share would come out near 30 / 8);
#     - a 30 % share in green contexts (CUDA 12.4) each made for a burst of 32 kernels and
#       destroyed after it (vgpu-core charges a burst at cuGreenCtxDestroy; bursts ran
#       unthrottled before), beside the same program without the library;
#     - absolute shares of a contending pair, 30 and 70 side by side, measured with a kernel of a
#       fixed amount of work (its rate over its rate alone is the share of the GPU it got; a
#       %clock64 spin would end on time while time-sliced and overstate it). Without MPS the
#       GPU time-slices the pair and each container's events also time its neighbour's turns,
#       which on a real node the agent's outer loop corrects from NVML per-process utilisation.
#       So the pair runs twice: without the agent, reported raw (no pass/fail: it shows how far
#       the in-process loop alone falls short), and with the agent's own elastic duty and its
#       control law (tests/isolation/elastic_agent.py over vgpu/agent/elastic.py, pynvml as
#       the agent uses it; the containers' directories laid out as the agent's), whose figures
#       must each come within 5 points of the guarantee after a settling time. That run needs
#       the checkout's Python environment (nvidia-ml-py), as step 2 does; without it the check
#       fails and says why.
#  2. The driver memory backend (hack/gpu-check-driver.sh): where the driver is r615+ with cgroup
#     v2, a program without the interposer is refused past its cgroup's hard limit; elsewhere it
#     reports "not available: driver X, kernel Y, cgroup vN" and why.
#  3. Then, as before: NVML discovery and the device plugin against the stand-in kubelet
#     (hack/gpu_check.py) and the NVML-marked tests. Extra arguments go to hack/gpu_check.py.
# Every section runs whatever an earlier one found; the exit status is the first failure's.
# VGPU_CHECK_SECONDS sets each measurement's length (default 5); VGPU_CHECK_WORK_ITERS the fixed-work
# kernel's steps (default 100000; its length alone is reported), VGPU_CHECK_SETTLE_SECONDS the
# agent's settling time before the pair is measured (default 8).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${PYTHON:-python3}"
seconds="${VGPU_CHECK_SECONDS:-5}"
out="${VGPU_CHECK_OUT:-gpu-check.json}"
iters="${VGPU_CHECK_WORK_ITERS:-100000}"
settle="${VGPU_CHECK_SETTLE_SECONDS:-8}"
work="$(mktemp -d)"
state="$work/state" # laid out as the agent's state directory: containers/<32 hex digits>/
trap 'rm -rf "$work"' EXIT

lib="$(hack/build-interposer.sh "$work/lib" | tail -1)"
for program in gpuspin gpumem; do
    "${CC:-cc}" -O2 -Wall -Wextra -Werror -o "$work/$program" \
        "tests/isolation/programs/$program.c" -lcuda
done
uuid="$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')"

# cdir NAME: the container's directory, where the agent would make it (an id from the name).
cdir() { printf '%s/containers/%s' "$state" "$(printf '%s' "$1" | md5sum | cut -c1-32)"; }

# container NAME MEMORY CORES: a container directory with its limits file (allowance = cores).
container() {
    local dir
    dir="$(cdir "$1")"
    mkdir -p "$dir/limits" "$dir/shared"
    printf 'vgpu-limits 1\ndevice %s memory=%s cores=%s limit=%s allowance=%s\n' \
        "$uuid" "$2" "$3" "$3" "$3" >"$dir/limits/limits"
}

# inside NAME COMMAND...: run COMMAND with the container's directories mounted and vgpu-core loaded.
inside() {
    local dir
    dir="$(cdir "$1")"
    shift
    unshare -m bash -c 'mount -t tmpfs vgpu-check /run && mkdir /run/vgpu /run/vgpu-shared &&
        mount --bind -o ro "$0/limits" /run/vgpu && mount --bind "$0/shared" /run/vgpu-shared &&
        exec env LD_PRELOAD="$1" "${@:2}"' "$dir" "$lib" "$@"
}

spin() { "$@" spin "$seconds" 1000; }

# A program that stops on a driver error (its JSON names the call) fails the checks that read
# it, and only those: every check is reported, and the script goes on (hence each `|| true`).
container mem 1073741824 100
inside mem "$work/gpuspin" mem 268435456 5 >"$work/mem.json" || true
spin "$work/gpuspin" >"$work/bare.json" || true
container free 1073741824 100
spin inside free "$work/gpuspin" >"$work/free.json" || true
for cores in 25 50 75; do
    container "c$cores" 1073741824 "$cores"
    spin inside "c$cores" "$work/gpuspin" >"$work/c$cores.json" || true
done
container p30 1073741824 30
container p60 1073741824 60
spin inside p30 "$work/gpuspin" >"$work/p30.json" &
spin inside p60 "$work/gpuspin" >"$work/p60.json" || true
wait
container g30 1073741824 30
inside g30 "$work/gpuspin" graph "$seconds" 1000 >"$work/g30.json" || true
container r30 1073741824 30
inside r30 "$work/gpuspin" reset "$seconds" 1000 >"$work/r30.json" || true
"$work/gpuspin" streams "$seconds" 1000 >"$work/s8-bare.json" || true
container s30 1073741824 30
inside s30 "$work/gpuspin" streams "$seconds" 1000 >"$work/s30.json" || true
"$work/gpuspin" green "$seconds" 1000 >"$work/green-bare.json" || true
container gr30 1073741824 30
inside gr30 "$work/gpuspin" green "$seconds" 1000 >"$work/gr30.json" || true
# The CPU a launch costs inside cuLaunchKernel, 1 us kernels one every 50 us: bare, and under a
# 50 % limit that measures every launch with events but holds none back.
"$work/gpuspin" pace "$seconds" 1 50 >"$work/pace-bare.json" || true
container pace50 1073741824 50
inside pace50 "$work/gpuspin" pace "$seconds" 1 50 >"$work/pace50.json" || true
container vmm 1073741824 100
inside vmm "$work/gpumem" vmm 805306368 >"$work/vmm.json" || true
inside vmm "$work/gpumem" graph 805306368 >"$work/graphmem.json" || true
inside vmm "$work/gpumem" capture 805306368 >"$work/capturemem.json" || true
inside vmm "$work/gpumem" share 805306368 >"$work/sharemem.json" || true
inside vmm "$work/gpumem" keep 805306368 >"$work/keepmem.json" || true
inside vmm "$work/gpumem" ipc 805306368 >"$work/ipcmem.json" || true
inside vmm "$work/gpumem" total >"$work/total.json" || true
inside vmm "$work/gpumem" limits 2147483648 >"$work/limits.json" || true
"$work/gpumem" limits 2147483648 >"$work/limits-bare.json" || true
"$work/gpumem" total >"$work/total-bare.json" || true
"$work/gpumem" keep 805306368 >"$work/keepmem-bare.json" || true
"$work/gpumem" ipc 805306368 >"$work/ipcmem-bare.json" || true

# The contending pair: its kernels' rate alone, then side by side without and with the agent.
"$work/gpuspin" work "$seconds" "$iters" >"$work/work.json" || true
pair() { # pair PREFIX [SETTLE]: 30 and 70 side by side
    local first
    container "$1-30" 1073741824 30
    container "$1-70" 1073741824 70
    inside "$1-30" "$work/gpuspin" work "$seconds" "$iters" "${2:-0}" >"$work/$1-30.json" &
    first=$!
    inside "$1-70" "$work/gpuspin" work "$seconds" "$iters" "${2:-0}" >"$work/$1-70.json" || true
    wait "$first" || true
}
pair raw
# The agent's elastic duty: it says "ready" once NVML answers and runs until its stdin closes.
mkfifo "$work/agent.in" "$work/agent.out"
PYTHONPATH=. "$python" -m tests.isolation.elastic_agent "$state" 0.5 \
    <"$work/agent.in" >"$work/agent.out" 2>"$work/agent.err" &
agent=$!
exec {agent_in}>"$work/agent.in" {agent_out}<"$work/agent.out"
read -r -u "$agent_out" agent_said || agent_said="exited: $(tail -1 "$work/agent.err")"
if [ "$agent_said" = ready ]; then
    pair agent "$settle"
    # What the agent last wrote (its scale shows the outer loop at work), before it stops.
    tail -qn1 "$(cdir agent-30)/limits/limits" "$(cdir agent-70)/limits/limits" >"$work/agent.limits"
fi
exec {agent_in}>&- {agent_out}<&-
wait "$agent" || true

core_rc=0 # the report's: 1 when a check failed; the steps below run all the same
"$python" - "$work" "$out" "$agent_said" <<'PY' || core_rc=$?
import json, pathlib, sys

work, out, agent_said = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]


def read(name):
    """A program's JSON report; output that is none (it crashed) reads as an error."""
    text = (work / f"{name}.json").read_text()
    try:
        report = json.loads(text)
    except ValueError:
        report = None
    return report if isinstance(report, dict) else {"error": "no report", "output": text[-200:]}


rate = lambda name: read(name)["kernels"] / read(name)["window_s"]


def judged(check, names, test, **shown):
    """A check over the named programs' reports; one that stopped on a driver error fails it,
    and so does a report the check cannot read (a field missing, a zero rate): every check is
    reported whatever happened."""
    reports = {name: read(name) for name in names}
    errors = {name: r for name, r in reports.items() if "error" in r}
    if errors:
        return {"check": check, "errors": errors, "pass": False}
    try:
        return {"check": check, **{k: f() for k, f in shown.items()},
                "pass": bool(test(*reports.values()))}
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        return {"check": check, "unreadable": repr(e), "reports": reports, "pass": False}


share_of = lambda name, alone: round(100 * rate(name) / rate(alone), 1)
checks = [judged("memory grant exact", ["mem"],
                 lambda mem: mem["total"] == 1 << 30 and mem["codes"] == [0, 0, 0, 0, 2],
                 total=lambda: read("mem")["total"], codes=lambda: read("mem")["codes"])]
overhead = lambda: 100 * (1 - rate("free") / rate("bare"))
checks.append(judged("overhead <= 2 %", ["free", "bare"], lambda *_: overhead() <= 2,
                     percent=lambda: round(overhead(), 2)))
for cores in (25, 50, 75):
    share = lambda cores=cores: 100 * rate(f"c{cores}") / rate("bare")
    checks.append(judged(f"cores {cores} within 8 points", [f"c{cores}", "bare"],
                         lambda *_, cores=cores, share=share: abs(share() - cores) <= 8,
                         share=lambda share=share: round(share(), 1)))
ratio = lambda: rate("p30") / rate("p60")
checks.append(judged("30 and 60 side by side at 0.5 +- 0.1", ["p30", "p60"],
                     lambda *_: abs(ratio() - 0.5) <= 0.1, ratio=lambda: round(ratio(), 3)))
graph = lambda: 100 * rate("g30") / rate("bare")
checks.append(judged("graph captured under 30 cores, launched within 8 points", ["g30", "bare"],
                     lambda g30, _: g30["capture"] == 0 and abs(graph() - 30) <= 8,
                     capture=lambda: read("g30")["capture"], share=lambda: round(graph(), 1)))
checks.append(judged("30 cores after cuDevicePrimaryCtxReset within 8 points", ["r30", "bare"],
                     lambda r30, bare: abs(share_of("r30", "bare") - 30) <= 8,
                     share=lambda: share_of("r30", "bare")))
# Eight streams at once: their rate over the same program's rate without the library is the
# share of the GPU's time it got, whether the GPU ran the streams' kernels at once or not.
checks.append(judged("30 cores on eight streams at once within 8 points", ["s30", "s8-bare"],
                     lambda s30, bare: abs(share_of("s30", "s8-bare") - 30) <= 8,
                     share=lambda: share_of("s30", "s8-bare")))
checks.append(judged("30 cores in green contexts destroyed after each burst within 8 points",
                     ["gr30", "green-bare"],
                     lambda gr30, bare: abs(share_of("gr30", "green-bare") - 30) <= 8,
                     share=lambda: share_of("gr30", "green-bare")))
added_ns = lambda: round(read("pace50")["launch_cpu_ns"] - read("pace-bare")["launch_cpu_ns"])
checks.append(judged("CPU per launch under a 50 % cores limit: at most 1 us more than bare",
                     ["pace50", "pace-bare"], lambda *_: added_ns() <= 1000,
                     added_ns=added_ns, bare_ns=lambda: read("pace-bare")["launch_cpu_ns"]))
checks.append(judged("VMM: released but mapped memory refuses a second create past the grant",
                     ["vmm"], lambda vmm: vmm["second"] == 2 and vmm["after_unmap"] == 0,
                     vmm=lambda: read("vmm")))
checks.append(judged("graph memory node past the grant refused", ["graphmem"],
                     lambda graphmem: graphmem["codes"] == [0, 2],
                     graphmem=lambda: read("graphmem")))
checks.append(judged("captured cuMemAllocAsync past the grant refused at capture",
                     ["capturemem"],
                     lambda capturemem: capturemem["codes"] == [0, 2] and capturemem["end"] == 0,
                     capturemem=lambda: read("capturemem")))
# "regular" and "distinct" say whether the driver's exported descriptor names one allocation
# (vgpu-core/README.md, "Memory"); if not, the import's mapping is refused (counted twice).
checks.append(judged("VMM shared: an importer holding it after the exporter let go keeps it counted",
                     ["sharemem"],
                     lambda s: s["import"] == s["map"] == 0 and s["while_held"] == 2
                     and s["after_let_go"] == 0,
                     sharemem=lambda: read("sharemem")))
# Bare, the driver's own free memory says whether a kept descriptor alone kept the memory
# ("regular": whether vgpu-core can tell that it is still open; vgpu-core/README.md, "Memory").
checks.append(judged("VMM: a descriptor kept after every release keeps the memory counted",
                     ["keepmem", "keepmem-bare"],
                     lambda k, bare: k["while_kept"] == 2 and k["after_close"] == 0,
                     keepmem=lambda: read("keepmem"),
                     driver_kept_it=lambda: read("keepmem-bare")["free_closed"]
                     >= read("keepmem-bare")["free_kept"] + read("keepmem-bare")["bytes"] // 2))
# Bare, the driver's own free memory says whether it kept the allocation after the exporter's
# free while the importer held it open (the Driver API reference calls that order undefined).
checks.append(judged("legacy IPC: memory an importer holds open after the exporter's free stays counted",
                     ["ipcmem", "ipcmem-bare"],
                     lambda i, bare: i["open"] == i["range"] == i["free"] == 0
                     and i["size"] == i["bytes"] and i["ordinal"] == 0 and i["while_held"] == 2
                     and i["after_close"] == 0,
                     ipcmem=lambda: read("ipcmem"),
                     driver_kept_it=lambda: read("ipcmem-bare")["free_after_free"]
                     < read("ipcmem-bare")["free_before_free"] + read("ipcmem-bare")["bytes"] // 2,
                     bare_size=lambda: read("ipcmem-bare")["size"]))
fields = ("total_mem", "total_mem_by_proc_address", "mem_info_total")
checks.append(judged("totalGlobalMem's source (cuDeviceTotalMem_v2) and cuMemGetInfo_v2 = grant",
                     ["total", "total-bare"],
                     lambda total, bare: [total[k] for k in fields] == [1 << 30] * 3
                     and bare["total_mem"] > 1 << 30,
                     total=lambda: read("total"), gpu_total_mem=lambda: read("total-bare")["total_mem"]))
# Bare, the free memory a 1 KiB raise of the stack takes is what the driver reserves for it;
# vgpu-core charges an estimate (per-thread size x resident threads) that should not exceed it.
checks.append(judged("cuCtxSetLimit: a heap past the grant refused, a raised stack charged",
                     ["limits", "limits-bare"],
                     lambda lim, bare: lim["heap"] == 2 and lim["stack"] == 0
                     and lim["stack_took"] > 0 and lim["free_restored"] == lim["free_before"],
                     limits=lambda: read("limits"),
                     driver_took=lambda: read("limits-bare")["stack_took"]))
pair = lambda prefix: [share_of(f"{prefix}-{c}", "work") for c in (30, 70)]
if agent_said == "ready":
    checks.append(judged("30 and 70 side by side, with the agent's outer loop: each within 5 points",
                         ["work", "agent-30", "agent-70"],
                         lambda *_: all(abs(g - c) <= 5 for g, c in zip(pair("agent"), (30, 70))),
                         shares=lambda: pair("agent"),
                         limits=lambda: (work / "agent.limits").read_text().splitlines(),
                         agent_log=lambda: (work / "agent.err").read_text().splitlines()[-5:]))
else:
    checks.append({"check": "30 and 70 side by side, with the agent's outer loop",
                   "agent": agent_said, "pass": False})
raw = [read(n) for n in ("work", "raw-30", "raw-70")]
report = {"gpu_kernels_per_s_without_library": None if "error" in read("bare")
          else round(rate("bare"), 1),
          "work_kernel_us_alone": None if "error" in raw[0] else round(1e6 / rate("work"), 1),
          "pair_30_70_without_agent": raw if any("error" in r for r in raw) else pair("raw"),
          "checks": checks,
          "pass": all(c["pass"] for c in checks)}
out.write_text(json.dumps(report, indent=2) + "\n")
print(json.dumps(report, indent=2))
sys.exit(0 if report["pass"] else 1)
PY
# VGPU_CHECK_VGPU_CORE_ONLY=1 ends here (tests/isolation runs this section on the stand-in driver).
[ "${VGPU_CHECK_VGPU_CORE_ONLY:-0}" = 1 ] && exit "$core_rc"

# Each section reports whatever the one before found: a failure is in the exit status, not a stop.
driver_rc=0 ips_rc=0 nvml_rc=0
hack/gpu-check-driver.sh "$work/gpuspin" || driver_rc=$?
"$python" hack/gpu_check.py --seconds 1 "$@" || ips_rc=$?
"$python" -m pytest -q -m nvml tests/node || nvml_rc=$?
echo "gpu-check: vgpu-core $core_rc, driver backend $driver_rc, hand-off $ips_rc, NVML $nvml_rc"
for rc in "$core_rc" "$driver_rc" "$ips_rc" "$nvml_rc"; do ((rc == 0)) || exit "$rc"; done
exit 0
