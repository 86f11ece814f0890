"""Every way a process starts GPU work is charged to its cores share, and measuring never breaks
the program: CUDA graph capture in every mode, launches after a primary-context reset and in a
process's many contexts, memsets, the deprecated cuLaunchGrid, a context-independent kernel
launched onto another GPU's stream, bursts in green contexts destroyed after them, and a driver
that cannot create events. Busy time is the stand-in's device timeline (`programs/launchpaths.c`
drives it)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.isolation.conftest import PROGRAMS, Build, Cluster
from tests.isolation.standins import GIB, Node, Standins, node_gpus
from tests.isolation.test_cores_share import busy_ns

SECONDS = "3"
KERNEL_US = "2000"
UNSUPPORTED, INVALIDATED, CAPTURED_EVENT = 900, 901, 907


def compile_launchpaths(built: Standins, out: Path) -> Path:
    source = PROGRAMS / "launchpaths.c"
    flags = ["-Wall", "-Wextra", "-Werror", "-O1", "-o", str(out), str(source)]
    subprocess.run(["cc", *flags, f"-L{built.dir}", "-l:libcuda.so.1", "-lpthread"], check=True)
    return out


@pytest.fixture(scope="session")
def launchpaths(plain_build: Build) -> Path:
    """The program, next to cuload (a path the sandbox shows)."""
    return compile_launchpaths(plain_build.standins, plain_build.cuload.parent / "launchpaths")


@pytest.fixture
def node(plain_build: Build) -> Iterator[Node]:
    n = Node(plain_build.standins, node_gpus(1, memory=GIB))
    try:
        yield n
    finally:
        n.close()


# ---- the stand-in's stream capture, against the documented rules (no interposer) ----


MODES = ("global", "thread", "relaxed")


def documented_answer(capture: str, thread: str, who: str) -> tuple[int, int]:
    """(what cuEventQuery answers, what cuStreamEndCapture answers), from the rules of
    cuThreadExchangeStreamCaptureMode and the Programming Guide's capture invalidation."""
    if who == "captured":  # conflicts with capture in every mode
        return CAPTURED_EVENT, INVALIDATED
    own = who == "same" and capture != "relaxed"
    others = who == "other" and thread == "global" and capture == "global"
    prohibited = thread != "relaxed" and (own or others)
    return (UNSUPPORTED, INVALIDATED) if prohibited else (0, 0)


@pytest.mark.parametrize("capture", MODES)
@pytest.mark.parametrize("thread", MODES)
@pytest.mark.parametrize("who", ["same", "other", "captured"])
def test_standin_event_query_during_capture_follows_the_interaction_modes(
    node: Node, launchpaths: Path, capture: str, thread: str, who: str
) -> None:
    """cuThreadExchangeStreamCaptureMode's rules: a potentially unsafe call is prohibited by the
    thread's own non-relaxed capture, and in GLOBAL mode by another thread's GLOBAL capture; a
    prohibited call invalidates the capture; a captured event conflicts in every mode."""
    done = subprocess.run(
        [str(launchpaths), "query", capture, thread, who],
        env=node.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = dict(line.split() for line in done.stdout.splitlines())
    answered = (int(lines["query"]), int(lines["capture"]))
    assert answered == documented_answer(capture, thread, who)


# ---- the interposer: a 30 % share holds on every path, and measuring breaks nothing ----


def share_of(
    c: Cluster, command: list[str], env: dict[str, str] | None = None
) -> tuple[float, str, str]:
    """(percent of the GPU's time a 30-core container kept busy, its stdout, its stderr)."""
    container = c.admit([(0, 30, 256)])
    done = c.sandbox.run(container, ["nice", "-n", "5", *command], env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    window = int(done.stdout.split()[-1])
    return 100 * busy_ns(c, c.uuids[0]) / window, done.stdout, done.stderr


@pytest.mark.parametrize(
    "how",
    [("capture", "global"), ("capture", "thread"), ("capture", "relaxed"), ("beside",)],
    ids=["global", "thread-local", "relaxed", "another-threads-global-capture"],
)
def test_a_graph_captured_under_a_limit_is_captured_and_charged_when_launched(
    timing_cluster: Cluster, launchpaths: Path, how: tuple[str, ...]
) -> None:
    """Capture after a warm-up (as torch.cuda.graph does) succeeds in every mode, and launching
    the captured graph in a loop holds the share; throttled launches on one thread leave another
    thread's global-mode capture intact."""
    command = [str(launchpaths), how[0], SECONDS, KERNEL_US, *how[1:]]
    share, out, _ = share_of(timing_cluster, command)
    assert "capture 0" in out
    assert share == pytest.approx(30, abs=5)


MEMSET = str(16 << 20)  # bytes: 168 us of simulated time per memset


@pytest.mark.parametrize(
    "args",
    [
        ("reset", SECONDS, KERNEL_US),
        ("release", SECONDS, KERNEL_US),
        ("contexts", "40", "keep", SECONDS, KERNEL_US),
        ("contexts", "40", "destroy", SECONDS, KERNEL_US),
        ("memset", SECONDS, MEMSET, "d8"),
        ("memset", SECONDS, MEMSET, "d32async"),
        ("memset", SECONDS, MEMSET, "d2d8async"),
        ("grid", SECONDS, KERNEL_US),
    ],
    ids=[
        "after-a-primary-context-reset",
        "after-the-primary-contexts-last-release",
        "in-a-41st-context-beside-40-live-ones",
        "in-a-new-context-after-40-destroyed",
        "cuMemsetD8",
        "cuMemsetD32Async",
        "cuMemsetD2D8Async-on-a-stream",
        "deprecated-cuLaunchGrid",
    ],
)
def test_work_is_charged_to_the_share(
    timing_cluster: Cluster, launchpaths: Path, args: tuple[str, ...]
) -> None:
    share, _, _ = share_of(timing_cluster, [str(launchpaths), *args])
    assert share == pytest.approx(30, abs=5)


def test_a_kernel_launched_on_another_gpus_stream_is_charged_to_that_gpus_share(
    timing_cluster: Cluster, launchpaths: Path
) -> None:
    """A context-independent kernel (cuLibraryGetKernel) runs in its stream's context, not the
    current one (Driver API reference, cuLaunchKernel): launched from GPU 0's context onto a
    stream of GPU 1, it is held to GPU 1's share, even while GPU 0's share is the whole GPU."""
    c = timing_cluster
    container = c.admit([(0, 100, 256), (1, 30, 256)])
    command = ["nice", "-n", "5", str(launchpaths), "otherdevice", SECONDS, KERNEL_US]
    done = c.sandbox.run(container, command, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    window = int(done.stdout.split()[-1])
    assert 100 * busy_ns(c, c.uuids[1]) / window == pytest.approx(30, abs=5)
    assert busy_ns(c, c.uuids[0]) == 0
    assert not [line for line in done.stderr.splitlines() if line.startswith("vgpu-core:")]


@pytest.mark.parametrize(
    "args",
    [("17", "400000"), ("2", "400000", "reset"), ("1", "400000", "noevents")],
    ids=["room-among-its-pending-launches", "primary-context-reset", "charged-by-estimate"],
)
def test_a_threads_launch_on_one_gpu_does_not_wait_for_another_threads_queue_on_another(
    timing_cluster: Cluster, launchpaths: Path, args: tuple[str, ...]
) -> None:
    """A thread per GPU (NCCL's "one device per thread", single-process multi-GPU frameworks):
    launches are asynchronous (Programming Guide, "Asynchronous Concurrent Execution"), so GPU
    1's thread launches at once while GPU 0's thread waits for room among its own context's
    pending measurements, or for them all to be charged before its context is reset, or (a
    driver that cannot create events) for its launch to complete to be charged by estimate.
    Held up until GPU 0's 400 ms kernels end, it would deadlock whenever they wait for GPU 1's
    (a collective)."""
    c = timing_cluster
    container = c.admit([(0, 30, 256), (1, 30, 256)])
    env = {"VGPU_STANDIN_FAIL_EVENTS": "1"} if args[-1] == "noevents" else None
    args = args[:-1] if env else args
    command = ["nice", "-n", "5", str(launchpaths), "pergpu", *args]
    done = c.sandbox.run(container, command, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    launch_ns = int(done.stdout.split("launch_ns ")[1].split()[0])
    assert launch_ns < 200_000_000


def test_bursts_in_green_contexts_destroyed_after_them_are_charged(
    timing_cluster: Cluster, launchpaths: Path
) -> None:
    """Work in a green context (cuGreenCtxCreate, its stream from cuGreenCtxStreamCreate) made
    for a burst of 8 kernels and destroyed after it (cuGreenCtxDestroy) is held to the share:
    what ran in it is charged before the context goes, as for cuCtxDestroy."""
    command = [str(launchpaths), "green", SECONDS, KERNEL_US, "8"]
    share, _, err = share_of(timing_cluster, command)
    assert share == pytest.approx(30, abs=5)
    assert not [line for line in err.splitlines() if line.startswith("vgpu-core:")]


def test_without_events_launches_are_charged_by_estimate_and_it_is_said_once(
    timing_cluster: Cluster,
) -> None:
    """A driver that cannot create events does not switch the throttle off: each launch is
    charged its last measured (or host-timed) duration, and one `vgpu-core:` line says so."""
    c = timing_cluster
    command = [str(c.build.cuload), "spin", "0", SECONDS, KERNEL_US, "kernel"]
    share, _, err = share_of(c, command, env={"VGPU_STANDIN_FAIL_EVENTS": "1"})
    assert share == pytest.approx(30, abs=5)
    assert [line for line in err.splitlines() if line.startswith("vgpu-core:")] == [
        next(line for line in err.splitlines() if "event" in line)
    ]


SHORT = "0.3"


@pytest.mark.parametrize(
    ("args", "events"),
    [
        (("capture", SHORT, KERNEL_US, "global"), "work"),
        (("beside", SHORT, KERNEL_US), "work"),
        (("reset", SHORT, KERNEL_US), "work"),
        (("release", SHORT, KERNEL_US), "work"),
        (("contexts", "40", "keep", SHORT, KERNEL_US), "work"),
        (("contexts", "40", "destroy", SHORT, KERNEL_US), "work"),
        (("memset", SHORT, MEMSET, "d2d8async"), "work"),
        (("grid", SHORT, KERNEL_US), "work"),
        (("capture", SHORT, KERNEL_US, "global"), "fail"),
        (("reset", SHORT, KERNEL_US), "fail"),
    ],
)
def test_every_launch_path_runs_clean_under_a_limit_on_both_builds(
    cluster: Cluster, args: tuple[str, ...], events: str
) -> None:
    """Each new path under ASan+UBSan too (the `cluster` fixture runs both builds); the library
    says nothing while events work, and one line when they cannot be created."""
    program = cluster.build.cuload.parent / "launchpaths"
    if not program.exists():
        compile_launchpaths(cluster.build.standins, program)
    env = {"VGPU_STANDIN_FAIL_EVENTS": "1"} if events == "fail" else None
    container = cluster.admit([(0, 30, 256)])
    done = cluster.sandbox.run(container, [str(program), *args], env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "capture" not in args or "capture 0" in done.stdout
    said = [line for line in done.stderr.splitlines() if line.startswith("vgpu-core:")]
    assert len(said) == (1 if events == "fail" else 0), done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("otherdevice", SHORT, KERNEL_US),
        ("green", SHORT, KERNEL_US, "8"),
        ("pergpu", "40", "20000"),
        ("pergpu", "40", "20000", "reset"),
        ("shared", "0.6", "20000"),
    ],
    ids=[
        "another-gpus-stream",
        "green-contexts",
        "a-thread-per-gpu",
        "a-thread-per-gpu-reset",
        "a-retain-released-while-another-thread-launches",
    ],
)
def test_launches_in_a_context_not_current_run_clean_on_both_builds(
    cluster: Cluster, args: tuple[str, ...]
) -> None:
    program = cluster.build.cuload.parent / "launchpaths"
    if not program.exists():
        compile_launchpaths(cluster.build.standins, program)
    container = cluster.admit([(0, 30, 256), (1, 30, 256)])
    done = cluster.sandbox.run(container, [str(program), *args])
    assert done.returncode == 0, done.stdout + done.stderr
    assert not [line for line in done.stderr.splitlines() if line.startswith("vgpu-core:")]


@pytest.mark.parametrize("mode", ["streams", "streams8"])
def test_launches_on_several_streams_run_clean_under_a_limit_on_both_builds(
    cluster: Cluster, mode: str
) -> None:
    """The overlap of several streams' spans is charged once through a mark event kept apart
    from the pool (launch.c): under ASan+UBSan too, with nothing said on stderr."""
    container = cluster.admit([(0, 30, 256)])
    command = [str(cluster.build.cuload), "spin", "0", SHORT, KERNEL_US, mode]
    done = cluster.sandbox.run(container, command, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not [line for line in done.stderr.splitlines() if line.startswith("vgpu-core:")]


def test_gpu_checks_graph_mode_captures_and_is_held_to_the_share_on_the_stand_in(
    timing_cluster: Cluster,
) -> None:
    """hack/gpu-check.sh's real-GPU program, in the mode that checks capture on hardware. Its PTX
    kernel takes the stand-in's default 1 us, too short for the host to fill the GPU, so only an
    upper bound on the share holds here."""
    c = timing_cluster
    program = c.build.cuload.parent / "gpuspin"
    source = PROGRAMS / "gpuspin.c"
    flags = ["-O2", "-Wall", "-Wextra", "-Werror", "-o", str(program), str(source)]
    subprocess.run(["cc", *flags, f"-L{c.build.standins.dir}", "-l:libcuda.so.1"], check=True)
    done = c.sandbox.run(c.admit([(0, 30, 256)]), [str(program), "graph", "2", "1000"])
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["capture"] == 0
    assert 100 * busy_ns(c, c.uuids[0]) / (report["window_s"] * 1e9) <= 35


def test_releasing_a_retain_of_a_busy_primary_context_waits_only_for_what_was_pending(
    timing_cluster: Cluster, launchpaths: Path
) -> None:
    """A library releases its own retain of the primary context (cuDevicePrimaryCtxRelease: the
    context stays active while other retains hold it) while another thread keeps the GPU busy.
    The release charges what was pending when it began (at most 16 launches of 20 ms), and waits
    for nothing launched after it: waiting for the context's queue to run empty would hold it
    for as long as the other thread keeps launching (here 2.5 s)."""
    c = timing_cluster
    container = c.admit([(0, 99, 256)])
    command = ["nice", "-n", "5", str(launchpaths), "shared", "2.5", "20000"]
    done = c.sandbox.run(container, command, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    release_ns = int(done.stdout.split("release_ns ")[1].split()[0])
    assert release_ns < 1_000_000_000
