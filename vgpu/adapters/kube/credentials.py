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

from vgpu.adapters.kube.errors import KubeConfigMissing

# The config loaders carry no annotations; give them a type once here.
_LOAD_INCLUSTER = cast(Callable[..., None], load_incluster_config)


def _kubeconfig_paths() -> str:
    return os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")


_ENTRIES = {"clusters": "cluster", "contexts": "context", "users": "user"}
"""A kubeconfig's lists and the mapping each entry carries beside its name (client-go's
`clientcmd/api/v1` Config: NamedCluster, NamedContext, NamedAuthInfo)."""


def shape_problem(doc: object) -> str | None:
    """What makes a parsed kubeconfig unusable, naming the field; None when its shape is a
    kubeconfig's. The client library assumes the shape and fails with its own internals
    ("'str' object does not support item assignment" for a file holding a word)."""
    if not isinstance(doc, dict):
        return f"expected a mapping (apiVersion, clusters, contexts, users), not {_kind(doc)}"
    for field, inner in _ENTRIES.items():
        entries = doc.get(field)
        if entries is None:
            continue
        if not isinstance(entries, list):
            return f"{field}: expected a list of {{name, {inner}}} entries, not {_kind(entries)}"
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                return f"{field}[{i}]: expected a mapping with name and {inner}"
            if not isinstance(entry.get("name"), str):
                return f"{field}[{i}].name: expected a string"
            if entry.get(inner) is not None and not isinstance(entry[inner], dict):
                return f"{field}[{i}].{inner}: expected a mapping, not {_kind(entry[inner])}"
    current = doc.get("current-context")
    if current is not None and not isinstance(current, str):
        return f"current-context: expected a context's name, not {_kind(current)}"
    return None


def _kind(value: object) -> str:
    """What a value is, in a person's words (no Python type names)."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "a string" if isinstance(value, str) else f"the value {value!r}"


def _check_shape(paths: str, context: str | None = None) -> None:
    """Refuse a kubeconfig the client library would answer with its own internals: no file at
    all ("Invalid kube-config file. No configuration found."), a shape it would trip over (each
    file of a `KUBECONFIG` list), or a `context` none of the files names (the message lists
    those they do, as kubectl users expect). An unreadable file is left to the loader."""
    import yaml

    files = [p for p in paths.split(os.pathsep) if p]
    if not any(os.path.exists(p) for p in files):
        raise KubeConfigMissing(
            f"kubeconfig {paths!r}: no such file; pass --kubeconfig PATH or set KUBECONFIG"
        )
    contexts: list[str] = []
    unread = False
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                doc = yaml.safe_load(f)
        except FileNotFoundError:
            continue  # in a KUBECONFIG list, as client-go: skipped
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            unread = True
            continue
        if doc is None:
            continue  # empty: the loader says no configuration was found
        problem = shape_problem(doc)
        if problem is not None:
            raise KubeConfigMissing(
                f"kubeconfig {path!r}: {problem}; fix the file or pass --kubeconfig PATH"
            )
        contexts += [c["name"] for c in doc.get("contexts") or [] if c["name"] not in contexts]
    if context is not None and not unread and context not in contexts:
        known = ", ".join(contexts) if contexts else "none"
        raise KubeConfigMissing(
            f"kubeconfig {paths!r} has no context {context!r} (its contexts: {known}); "
            "pass --context NAME"
        )


def _load_kubeconfig(path: str, configuration: Any, context: str | None = None) -> None:
    import yaml
    from kubernetes.config.kube_config import load_kube_config  # heavy: see the module docstring

    _check_shape(path, context)
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
