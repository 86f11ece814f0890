"""Finding Kubernetes credentials: explicit kubeconfig, in-cluster service account, or default.

Order: an explicit `kubeconfig` path wins; else the pod's service account when running in a pod
(`KUBERNETES_SERVICE_HOST` set); else `$KUBECONFIG` or `~/.kube/config`. Nothing usable raises
`KubeConfigMissing` naming what was tried and how to fix it. `$KUBECONFIG` is read at call time
(the client library reads it once at import).

The kubeconfig loader (`kubernetes.config.kube_config`: requests-oauthlib, PyYAML, ~5 MiB resident)
is imported only when a kubeconfig is used; a daemon in a pod needs just the in-cluster loader.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, cast

from kubernetes.client.configuration import Configuration
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import load_incluster_config

from vgpu.adapters.kubeerrors import KubeConfigMissing

# The config loaders carry no annotations; give them a type once here.
_LOAD_INCLUSTER = cast(Callable[..., None], load_incluster_config)


def _kubeconfig_paths() -> str:
    return os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")


def _load_kubeconfig(path: str, configuration: Any, context: str | None = None) -> None:
    import yaml
    from kubernetes.config.kube_config import load_kube_config  # heavy: see the module docstring

    try:
        cast(Callable[..., None], load_kube_config)(
            config_file=path, client_configuration=configuration, context=context
        )
    except yaml.YAMLError as e:  # the loader parses with PyYAML and lets its errors through
        raise KubeConfigMissing(
            f"kubeconfig {path!r} is not valid YAML ({_first_line(e)}); fix the file or pass "
            "--kubeconfig PATH"
        ) from e
    except (ConfigException, OSError, ValueError, TypeError) as e:
        raise KubeConfigMissing(
            f"cannot use kubeconfig {path!r}: {e}; pass --kubeconfig PATH or set KUBECONFIG"
        ) from e


def _first_line(error: Exception) -> str:
    return " ".join(str(error).split())


def load_configuration(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A `kubernetes.client.Configuration` from the first credentials source that exists; a
    `context` names one of the kubeconfig's contexts (and so rules out in-cluster credentials)."""
    configuration = Configuration()
    if kubeconfig or context:
        _load_kubeconfig(kubeconfig or _kubeconfig_paths(), configuration, context)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            _LOAD_INCLUSTER(client_configuration=configuration)
        except ConfigException as e:
            raise KubeConfigMissing(f"in-cluster configuration is unusable: {e}") from e
    elif any(os.path.exists(p) for p in _kubeconfig_paths().split(os.pathsep)):
        _load_kubeconfig(_kubeconfig_paths(), configuration)
    else:
        raise KubeConfigMissing(
            "no Kubernetes credentials: not running in a pod (KUBERNETES_SERVICE_HOST is "
            f"unset) and no kubeconfig at {_kubeconfig_paths()}; pass --kubeconfig PATH "
            "or set KUBECONFIG"
        )
    return configuration
