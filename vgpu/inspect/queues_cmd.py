"""`--queues` of `kubectl inspect vgpu`: read the queue ConfigMap (or a file) and print the
queue report (`vgpu.inspect.queues`). Kept apart from the node report's command line. The
Kubernetes client is imported only to read a live cluster, as the node report does (a plain
install renders saved snapshots without it)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from vgpu.api.queues.config import CONFIG_KEY
from vgpu.api.resources import ResourceNames
from vgpu.inspect.queues import as_dict, queue_report, render_queues
from vgpu.inspect.snapshot import Snapshot

if TYPE_CHECKING:
    from vgpu.adapters.kube.calls import KubeApi

DEFAULT_CONFIG = "vgpu-system/vgpu-queues"


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--queues",
        action="store_true",
        help="who runs queues and on which configuration; per queue its weight, share and, "
        "per dimension, deserved, allocated and pending; held pods and why (the leader's words)",
    )
    parser.add_argument(
        "--queues-config",
        metavar="NAMESPACE/NAME",
        default=DEFAULT_CONFIG,
        help=f"the queue ConfigMap, as the extender's flag (default {DEFAULT_CONFIG})",
    )
    parser.add_argument(
        "--queues-file",
        metavar="FILE",
        type=Path,
        help="the queues as JSON (the ConfigMap's queues.json) instead of the ConfigMap; "
        "with --fake-cluster",
    )


def read_config_map(api: KubeApi, where: str) -> str | None:
    """The ConfigMap's queues.json (None: no such ConfigMap)."""
    from vgpu.adapters.kube.calls import KubeError, KubeForbidden, KubeNotFound
    from vgpu.inspect.reader import InspectError

    namespace, _, name = where.partition("/")
    if not namespace or not name:
        raise InspectError(f"--queues-config: {where!r} must be NAMESPACE/NAME")
    try:
        data = api.get_config_map(namespace, name).get("data") or {}
    except KubeNotFound:
        return None
    except KubeForbidden as e:
        raise InspectError(
            f"no permission to read ConfigMap {where} ({e}); the ClusterRole vgpu-inspect grants it"
        ) from e
    except KubeError as e:
        raise InspectError(f"reading ConfigMap {where} failed: {e}") from e
    text = data.get(CONFIG_KEY)
    return str(text) if text is not None else None


def render(snapshot: Snapshot, config_text: str | None, names: ResourceNames, output: str) -> str:
    report = queue_report(snapshot, config_text, names)
    if output == "table":
        return render_queues(report)
    if output == "json":
        return json.dumps(as_dict(report), indent=2) + "\n"
    import yaml

    return str(yaml.safe_dump(dict(as_dict(report)), sort_keys=False))
