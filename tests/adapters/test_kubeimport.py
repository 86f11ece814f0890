"""The deferred package `__init__` (vgpu.adapters.kube.client_import) on a throwaway package, and
the node agent's import path with it: the real kubernetes client, minus its eager extras."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from vgpu.adapters.kube.client_import import defer_package_init

PKG = "vgpu_defer_probe"


@pytest.fixture
def probe(tmp_path: Path) -> Iterator[Path]:
    """A package whose `__init__` counts its runs and eagerly imports its `heavy` sub-module."""
    root = tmp_path / PKG
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text(
        textwrap.dedent(
            """
            import builtins
            builtins.probe_runs = getattr(builtins, "probe_runs", 0) + 1
            VERSION = "1.2"
            from . import heavy
            """
        )
    )
    (root / "heavy.py").write_text("LOADED = True\n")
    (root / "light.py").write_text("VALUE = 7\n")
    (root / "sub" / "__init__.py").write_text("from .deep import X\n")
    (root / "sub" / "deep.py").write_text("X = 3\n")
    sys.path.insert(0, str(tmp_path))
    yield root
    sys.path.remove(str(tmp_path))
    for name in [m for m in sys.modules if m == PKG or m.startswith(PKG + ".")]:
        del sys.modules[name]
    import builtins

    vars(builtins).pop("probe_runs", None)


def _runs() -> int:
    import builtins

    return int(getattr(builtins, "probe_runs", 0))


def test_submodules_import_without_running_the_package_body(probe: Path) -> None:
    assert defer_package_init(PKG)
    from vgpu_defer_probe import light  # type: ignore[import-not-found]
    from vgpu_defer_probe.sub.deep import X  # type: ignore[import-not-found]

    assert (light.VALUE, X) == (7, 3)
    assert _runs() == 0 and f"{PKG}.heavy" not in sys.modules


def test_other_names_run_the_body_once_then_behave_normally(probe: Path) -> None:
    assert defer_package_init(PKG)
    pkg = sys.modules[PKG]
    assert pkg.VERSION == "1.2" and _runs() == 1
    assert pkg.heavy.LOADED and pkg.VERSION == "1.2" and _runs() == 1
    assert "__getattr__" not in vars(pkg)
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _ = pkg.missing


def test_a_name_that_is_nowhere_runs_the_body_then_fails_as_usual(probe: Path) -> None:
    assert defer_package_init(PKG)
    with pytest.raises(ImportError):
        from vgpu_defer_probe import nothing_here  # noqa: F401
    assert _runs() == 1  # a name that is no sub-module: the body ran to look for it


def test_already_imported_or_not_a_package_is_left_alone(probe: Path) -> None:
    import vgpu_defer_probe

    assert _runs() == 1
    assert not defer_package_init(PKG)
    assert not defer_package_init(f"{PKG}.light")  # a plain module, not a package
    assert not defer_package_init("no_such_package_here")
    assert sys.modules[PKG] is vgpu_defer_probe and _runs() == 1


def test_a_missing_package_and_its_children_are_left_alone() -> None:
    """Without the client installed (`pip install .`, no extras) `import vgpu.adapters`, which
    defers `kubernetes` and `kubernetes.config`, must not fail (it raised ModuleNotFoundError)."""
    assert not defer_package_init("no_such_package_here")
    assert not defer_package_init("no_such_package_here.config")
    assert "no_such_package_here" not in sys.modules


# What the agent loads: checked in a fresh interpreter, as the agent starts.
AGENT_IMPORTS = """
import sys
import vgpu.agent.agent
from kubernetes.client.api_client import ApiClient
from vgpu.adapters.kube.calls import KubeApi
KubeApi(ApiClient()).close()
"""
NOT_LOADED = (
    "kubernetes.client.models.",  # ~900 pydantic models
    "kubernetes.client.api.",  # generated API classes (core_v1_api alone is 4 MB of code)
    "kubernetes.config.kube_config",  # only with a kubeconfig
    "kubernetes.dynamic",
    "kubernetes.stream",
    "kubernetes.utils.create_from_yaml",
    "kubernetes.informer",
)
REPO = Path(__file__).resolve().parents[2]


def _python(script: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.split()


def test_agent_import_path_skips_models_api_classes_and_extras() -> None:
    loaded = _python(AGENT_IMPORTS + "print('\\n'.join(sorted(sys.modules)))\n")
    assert "kubernetes.client.api_client" in loaded  # the real client is what sends requests
    assert "vgpu.agent.agent" in loaded
    eager = [m for m in loaded if m.startswith(NOT_LOADED)]
    assert eager == []


def test_the_deferred_kubernetes_package_is_complete_on_demand() -> None:
    script = AGENT_IMPORTS + textwrap.dedent(
        """
        import kubernetes
        from kubernetes import client, config, dynamic, watch
        from kubernetes.config import load_kube_config, load_incluster_config
        assert kubernetes.__version__ and client.CoreV1Api and client.V1Pod
        assert callable(load_kube_config) and callable(load_incluster_config)
        assert dynamic.DynamicClient and watch.Watch
        print("ok")
        """
    )
    assert _python(script) == ["ok"]
