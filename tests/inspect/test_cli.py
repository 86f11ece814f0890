"""The console script end to end: --fake-cluster, --save-snapshot, NODE args, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.inspect.builders import node, pod
from tests.kubeapi import FakeApiServer
from vgpu.inspect.cli import main
from vgpu.inspect.snapshot import loads

HERE = Path(__file__).parent
CLUSTER = HERE.parents[1] / "examples" / "cluster-snapshot.yaml"


def test_fake_cluster_default_view(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # a pipe's view: xdist's workers set COLUMNS
    assert main(["--fake-cluster", str(CLUSTER)]) == 0
    assert capsys.readouterr().out == (HERE / "golden" / "table.txt").read_text()


def test_json_for_one_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--fake-cluster", str(CLUSTER), "-o", "json", "gpu-a"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [n["name"] for n in doc["nodes"]] == ["gpu-a"]
    assert doc["totals"]["pendingPods"] == 1


def test_missing_or_bad_file_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--fake-cluster", str(tmp_path / "nope.yaml")]) == 1
    assert "nope.yaml" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Nope\n")
    assert main(["--fake-cluster", str(bad)]) == 1
    assert "kind: expected 'ClusterSnapshot'" in capsys.readouterr().err


def test_bad_usage_exit_2() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["-o", "xml"])
    assert exc.value.code == 2


def kubeconfig(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "config"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": url}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
                "current-context": "fake",
            }
        )
    )
    return path


def test_live_cluster_through_kubeconfig_and_save_snapshot(
    kube_server: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kube_server.store.put(node("n1", [("Tesla T4", 15360)]))
    kube_server.store.put(pod("a/x", node="n1", asks={"m": (30, 0)}, shares={"m": [(0, 30, 4608)]}))
    saved = tmp_path / "snap.json"
    config = kubeconfig(tmp_path, kube_server.url)
    assert main(["--kubeconfig", str(config), "--save-snapshot", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "30/100 4.5/15Gi" in out and "Snapshot taken" not in out
    snap = loads(saved.read_text())
    assert snap.taken_at and [p["metadata"]["name"] for p in snap.pods] == ["x"]
    assert json.loads(saved.read_text())["kind"] == "ClusterSnapshot"
    assert main(["--fake-cluster", str(saved)]) == 0
    assert "30/100 4.5/15Gi" in capsys.readouterr().out


def test_live_cluster_forbidden(
    kube_server: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kube_server.inject("GET", r"/api/v1/nodes", status=403, times=None)
    assert main(["--kubeconfig", str(kubeconfig(tmp_path, kube_server.url))]) == 1
    assert "no permission" in capsys.readouterr().err


def test_vgpu_inspect_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    from vgpu.cli.main import main as vgpu_main

    assert vgpu_main(["inspect", "--fake-cluster", str(CLUSTER), "-d"]) == 0
    assert capsys.readouterr().out == (HERE / "golden" / "details.txt").read_text()


def test_missing_node_exits_1_after_showing_the_others(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--fake-cluster", str(CLUSTER), "gpu-a", "nosuch"]) == 1
    out = capsys.readouterr()
    assert out.out.splitlines()[1].startswith("NODE") and "gpu-a" in out.out
    assert out.err == "error: no such node: nosuch\n"
    assert main(["--fake-cluster", str(CLUSTER), "nosuch"]) == 1


@pytest.mark.parametrize(
    ("selector", "shown"),
    [
        ("kubernetes.io/hostname=gpu-b", ["gpu-b"]),
        ("kubernetes.io/hostname in (gpu-a, gpu-c)", ["gpu-a", "gpu-c"]),
        ("kubernetes.io/hostname notin (gpu-a),kubernetes.io/hostname!=gpu-c", ["gpu-b"]),
    ],
)
def test_selector_on_a_saved_cluster(
    selector: str, shown: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--fake-cluster", str(CLUSTER), "-o", "json", "-l", selector]) == 0
    assert [n["name"] for n in json.loads(capsys.readouterr().out)["nodes"]] == shown


def test_selector_matching_nothing_and_bad_selector(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--fake-cluster", str(CLUSTER), "-l", "pool=none"]) == 0
    assert "No node matches the selector 'pool=none'" in capsys.readouterr().err
    assert main(["--fake-cluster", str(CLUSTER), "--selector", "a in b"]) == 1
    assert "--selector: cannot read" in capsys.readouterr().err


def test_columns_condense_the_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["--fake-cluster", str(CLUSTER)]) == 0
    assert capsys.readouterr().out == (HERE / "golden" / "table-demo-80.txt").read_text()
    assert main(["--fake-cluster", str(CLUSTER), "--width", "0"]) == 0
    assert capsys.readouterr().out == (HERE / "golden" / "table.txt").read_text()


def test_context_and_selector_on_a_live_cluster(
    kube_server: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kube_server.store.put(node("n1", [("Tesla T4", 15360)]))
    kube_server.store.put(node("n2", [("Tesla T4", 15360)]))
    config = kubeconfig(tmp_path, kube_server.url)
    doc = json.loads(config.read_text())
    doc["clusters"].append({"name": "down", "cluster": {"server": "http://127.0.0.1:9"}})
    doc["contexts"].append({"name": "down", "context": {"cluster": "down", "user": "u"}})
    doc["current-context"] = "down"
    config.write_text(json.dumps(doc))
    argv = ["--kubeconfig", str(config), "-o", "json", "-l", "kubernetes.io/hostname=n2"]
    assert main([*argv, "--context", "fake"]) == 0
    assert [n["name"] for n in json.loads(capsys.readouterr().out)["nodes"]] == ["n2"]
    assert main([*argv, "--context", "nosuch"]) == 1
    assert "nosuch" in capsys.readouterr().err


def test_save_snapshot_into_a_missing_folder_is_refused_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing" / "snap.json"
    assert main(["--kubeconfig", str(tmp_path / "none"), "--save-snapshot", str(target)]) == 1
    assert capsys.readouterr().err == (
        f"error: --save-snapshot: {target.parent} is not an existing directory\n"
    )


@pytest.mark.parametrize("value", ["vgpu-extender", "a/b/c", "Bad/x", "/x"])
def test_a_lease_that_is_not_namespace_slash_name_is_a_usage_error(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--fake-cluster", str(CLUSTER), "--extender-lease", value])
    assert exc.value.code == 2
    assert "argument --extender-lease" in capsys.readouterr().err
