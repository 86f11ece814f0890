from pathlib import Path

import pytest

from vgpu.cli.trace_files import read_trace
from vgpu.sim.trace import TraceError

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,2,T4\nn1,96000,393216,8,G2\n"
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    "p0,4000,8192,1,470,,LS,Running,0,10,0\n"
    "p1,8000,16384,2,1000,G2,LS,Running,0,10,0\n"
    "p2,2000,4096,0,0,,BE,Running,0,10,0\n"
)


def _write(tmp_path: Path, nodes: str, pods: str) -> tuple[Path, Path]:
    n, p = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    n.write_text(nodes)
    p.write_text(pods)
    return n, p


def test_reads_nodes_and_pods(tmp_path: Path) -> None:
    trace = read_trace(*_write(tmp_path, NODES, PODS))
    assert [len(n.gpus) for n in trace.nodes] == [2, 8]
    p0, p1, p2 = trace.pods
    assert p0.containers[0].cores == 47 and p0.containers[0].memory_mib is None
    assert p1.containers[0].cores == 200 and p1.selector.include_models == ("G2",)
    assert p2.containers == ()


def test_five_column_variant_is_accepted(tmp_path: Path) -> None:
    pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,500\n"
    assert len(read_trace(*_write(tmp_path, NODES, pods)).pods) == 1


@pytest.mark.parametrize(
    ("pods", "message"),
    [
        ("name,cpu_milli,num_gpu,gpu_milli\np,1,1,100\n", "missing column(s) memory_mib"),
        ("", "empty file"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", "no data rows"),
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np,1,1,1,100,A100\n",
            "unknown GPU model(s) A100",
        ),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,x,1,1,100\n", "column cpu_milli is 'x'"),
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,2,500\n",
            "several GPUs must be whole",
        ),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,455\n", "not a multiple of 10"),
    ],
    ids=[
        "missing-column",
        "empty",
        "header-only",
        "unknown-model",
        "not-a-number",
        "fractional-multi",
        "odd-milli",
    ],
)
def test_bad_input_names_file_line_and_fix(tmp_path: Path, pods: str, message: str) -> None:
    with pytest.raises(TraceError) as err:
        read_trace(*_write(tmp_path, NODES, pods))
    assert message in str(err.value)
    assert "pods.csv" in str(err.value)


def test_embedded_trace_matches_the_published_statistics() -> None:
    trace = read_trace()
    assert len(trace.nodes) == 1213
    assert sum(len(n.gpus) for n in trace.nodes) == 6212
    assert len(trace.pods) == 8152
    assert sum(p.gpu_milli for p in trace.pods) == 6_086_800
