"""Import the official Kubernetes client without running its packages' eager `__init__` bodies.

Why: `import kubernetes.client` first runs `kubernetes/__init__.py`, which imports every
sub-package (config, dynamic, watch, stream, utils, leaderelection, informer) and through them
websocket-client, jsonschema, requests/oauthlib and PyYAML; `kubernetes/config/__init__.py`
likewise imports the kubeconfig loader (requests-oauthlib, PyYAML) even in a pod, which only needs
the in-cluster loader. vgpu uses the client's request layer (`kubernetes.client.api_client`), its
exceptions and the two config loaders; the rest cost the node agent about 10 MiB of its 60 MiB
resident budget, in every process.

`defer_package_init(name)` registers the real package in `sys.modules` (its own spec, `__file__`
and `__path__`, so `import kubernetes.client` finds and runs sub-modules as usual) with its
`__init__` body not yet run. Nothing goes missing; the body only runs later:

- a sub-module looked up on the package (`from kubernetes import watch`, `kubernetes.client`) is
  imported on its own, which is all the body would have bound under that name;
- any other name (`kubernetes.__version__`, `from kubernetes.config import load_kube_config`,
  `from kubernetes import *`) runs the real body once, in the same module object (PEP 562 module
  `__getattr__`), and is then answered from it as if the package had been imported normally.

A package already imported is left alone, so calling this after someone imported `kubernetes`
is a harmless no-op. `vgpu/adapters/__init__.py` calls `defer_kubernetes_init()`, so it is in
place before any adapter imports the client.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from collections.abc import Callable
from importlib.machinery import ModuleSpec

_LOCK = threading.RLock()


def defer_package_init(name: str) -> bool:
    """Register package `name` with its `__init__` body deferred. False, changing nothing, if it
    is already imported, is not a package or is not installed (nor its parent: `vgpu.adapters`
    imports without the Kubernetes client). Defer a parent package before its children."""
    with _LOCK:
        if name in sys.modules:
            return False
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:  # a parent package is not installed: nothing to defer
            return False
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return False
        module = importlib.util.module_from_spec(spec)
        vars(module)["__getattr__"] = _completer(module, spec)
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
        return True


def _completer(module: types.ModuleType, spec: ModuleSpec) -> Callable[[str], object]:
    ran = threading.Event()

    def __getattr__(attr: str) -> object:
        if not attr.startswith("__") and importlib.util.find_spec(f"{spec.name}.{attr}"):
            return importlib.import_module(f"{spec.name}.{attr}")
        with _LOCK:  # other threads wait here until the body has run
            if not ran.is_set():
                ran.set()  # the body itself may look names up: answer those from the dict
                _run_body(module, spec, __getattr__)
        try:
            return vars(module)[attr]
        except KeyError:
            raise AttributeError(f"module {spec.name!r} has no attribute {attr!r}") from None

    return __getattr__


def _run_body(module: types.ModuleType, spec: ModuleSpec, hook: Callable[[str], object]) -> None:
    """Run the package's real `__init__` in `module`, then drop `hook` (unless it defined one)."""
    assert spec.loader is not None
    spec.loader.exec_module(module)
    if vars(module).get("__getattr__") is hook:
        del vars(module)["__getattr__"]


def defer_kubernetes_init() -> None:
    """Defer the client packages whose `__init__` imports what vgpu never uses: the top level,
    `config` (kubeconfig loader: requests-oauthlib, PyYAML; a pod only needs the in-cluster one)
    and `utils` (create-from-YAML; the REST layer needs only its retry helpers)."""
    try:
        for name in ("kubernetes", "kubernetes.config", "kubernetes.utils"):
            defer_package_init(name)
    except ImportError:
        return  # no client installed (a plain `pip install vgpu`): nothing to defer
