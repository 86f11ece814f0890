"""Bad flags and bad surroundings give one clear line and a non-zero exit, never a traceback."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from vgpu.cli.main import main

BAD_YAML = "apiVersion: v1\nclusters: [\n  - name: x\n  bad: : :\n"


@pytest.fixture(autouse=True)
def no_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No in-cluster credentials and no kubeconfig: the agent runs without an API server."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.setenv("VGPU_ASSIGNMENT_KEY", "a-test-key")  # the daemons refuse to start without


def agent(tmp_path: Path, *argv: str) -> list[str]:
    return [
        "node-agent",
        "--fake-gpus",
        "1xT4",
        "--device-plugin-dir",
        str(tmp_path / "plugins"),
        "--pod-resources-socket",
        str(tmp_path / "pod-resources.sock"),
        "--metrics-port",
        "0",
        "--watchdog-s",
        "0",
        *argv,
    ]


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("command", ["extender", "inspect"])
def test_kubeconfig_that_is_not_yaml(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config"
    config.write_text(BAD_YAML)
    extra = ["--insecure-http"] if command == "extender" else []
    assert main([command, "--kubeconfig", str(config), *extra]) in (1, 2)
    err = one_line_error(capsys)
    assert "not valid YAML" in err and str(config) in err


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("junk\n", "expected a mapping"),
        ("- a\n- b\n", "expected a mapping"),
        ("apiVersion: v1\nclusters: 5\n", "clusters"),
        ("apiVersion: v1\nclusters: [x]\n", "clusters[0]"),
        ("apiVersion: v1\nclusters: [{name: a, cluster: x}]\n", "clusters[0].cluster"),
        ("apiVersion: v1\ncontexts: [{context: {}}]\n", "contexts[0].name"),
        ("apiVersion: v1\nusers: {a: b}\n", "users"),
        ("apiVersion: v1\ncurrent-context: [a]\n", "current-context"),
    ],
)
@pytest.mark.parametrize("command", ["extender", "inspect"])
def test_a_kubeconfig_of_the_wrong_shape_names_the_field(
    command: str, text: str, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once `'str' object does not support item assignment`."""
    config = tmp_path / "config"
    config.write_text(text)
    extra = ["--insecure-http"] if command == "extender" else []
    assert main([command, "--kubeconfig", str(config), *extra]) in (1, 2)
    err = one_line_error(capsys)
    assert field in err and str(config) in err and "object" not in err


@pytest.mark.parametrize(
    ("argv", "flag", "why"),
    [
        (["inspect", "--width", "-5"], "--width", "0 or more"),
        (["inspect", "--width", "wide"], "--width", "0 or more"),
        (["simulate", "--jobs", "-3"], "--jobs", "0 or more"),
        (["simulate", "--cluster-nodes", "-1"], "--cluster-nodes", "0 or more"),
        (["node-agent", "--metrics-port", "99999"], "--metrics-port", "port number"),
        (["node-agent", "--metrics-port", "-1"], "--metrics-port", "port number"),
        (["extender", "--port", "99999"], "--port", "port number"),
        (["extender", "--port", "http"], "--port", "port number"),
    ],
)
def test_a_negative_count_or_a_port_out_of_range_is_a_usage_error_naming_the_flag(
    argv: list[str], flag: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and why in err


def test_plugin_dir_under_a_regular_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    regular = tmp_path / "file"
    regular.write_text("")
    argv = agent(tmp_path)
    argv[argv.index("--device-plugin-dir") + 1] = str(regular / "device-plugins")
    assert main(argv) == 2
    err = one_line_error(capsys)
    assert "--device-plugin-dir" in err and f"{regular} is a file" in err


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        yield int(held.getsockname()[1])


def test_metrics_port_in_use(
    busy_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(agent(tmp_path, "--metrics-port", str(busy_port))) == 2
    err = one_line_error(capsys)
    assert f"--metrics-port: cannot listen on 0.0.0.0:{busy_port}" in err


def test_extender_port_in_use(
    busy_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    argv = ["extender", "--kubeconfig", str(config), "--port", str(busy_port), "--insecure-http"]
    assert main([*argv, "--no-leader-elect"]) == 2
    assert f"--port: cannot listen on 0.0.0.0:{busy_port}" in one_line_error(capsys)


@pytest.mark.parametrize("spec", ["", "  "])
def test_empty_fake_gpus_is_refused_not_nvml(
    spec: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = agent(tmp_path)
    argv[argv.index("--fake-gpus") + 1] = spec
    assert main(argv) == 2
    assert "--fake-gpus: empty" in one_line_error(capsys)


def test_verbose_after_the_subcommand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = agent(tmp_path, "-v")
    argv[argv.index("--fake-gpus") + 1] = ""
    assert main(argv) == 2  # parsed, reached the agent's own check
    assert "--fake-gpus: empty" in capsys.readouterr().err


def test_unknown_fake_gpu_model_names_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = agent(tmp_path)
    argv[argv.index("--fake-gpus") + 1] = "4xA100"
    assert main(argv) == 2
    err = one_line_error(capsys)
    assert err.startswith("vgpu: error: --fake-gpus: spec term 1") and "A100-SXM4-80GB" in err


def test_no_nvml_suggests_fake_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from vgpu.adapters import gpu

    def unavailable(*_a: object, **_k: object) -> None:
        raise gpu.GpuBackendUnavailable("NVML library not found: NVML Shared Library Not Found")

    monkeypatch.setattr(gpu.NvmlBackend, "__init__", unavailable)
    argv = agent(tmp_path)
    del argv[argv.index("--fake-gpus") : argv.index("--fake-gpus") + 2]
    assert main(argv) == 2
    err = one_line_error(capsys)
    assert "cannot read this node's GPUs" in err and "--fake-gpus 4xA100-SXM4-80GB" in err


def test_bad_key_file_fails_before_the_gpus_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = agent(tmp_path, "--assignment-key-file", str(tmp_path / "nokey"))
    del argv[argv.index("--fake-gpus") : argv.index("--fake-gpus") + 2]
    assert main(argv) == 2
    assert "--assignment-key-file: cannot read" in one_line_error(capsys)


def test_a_missing_kubeconfig_file_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once "Invalid kube-config file. No configuration found." for a path that does not exist."""
    missing = tmp_path / "nowhere.yaml"
    assert main(["inspect", "--kubeconfig", str(missing)]) == 1
    err = one_line_error(capsys)
    assert f"kubeconfig {str(missing)!r}: no such file" in err and "Invalid" not in err


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: alpha, context: {cluster: c, user: u}}, {name: beta, context: {cluster: c, user: u}}]
current-context: alpha
"""


def test_an_unknown_context_lists_the_kubeconfigs_contexts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config"
    config.write_text(KUBECONFIG)
    assert main(["inspect", "--kubeconfig", str(config), "--context", "gamma"]) == 1
    err = one_line_error(capsys)
    assert "no context 'gamma' (its contexts: alpha, beta)" in err
