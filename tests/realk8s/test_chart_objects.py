"""Every object the Helm chart renders, for each CI value set, is accepted by a real
kube-apiserver: server-side apply with `dryRun=All` and `fieldValidation=Strict`, so unknown or
duplicate fields, wrong types, invalid names and the ValidatingAdmissionPolicy's CEL (compiled
and type-checked by the API server) all fail here, beyond what the offline schemas check.

Kinds the cluster does not serve (the Prometheus Operator's) are left to hack/tools/strictkinds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.test_chart import _helm_or_skip
from tests.realk8s import binary
from tests.realk8s.cluster import RealCluster
from tests.realk8s.manifests import create, object_path
from tests.realk8s.rest import ApiError

pytestmark = pytest.mark.realk8s

ROOT = Path(__file__).resolve().parents[2]
VALUE_SETS = sorted((ROOT / "charts" / "vgpu" / "ci").glob("*-values.yaml"))
NAMESPACE = "vgpu-chart-check"  # not vgpu-system: the cluster's own vgpu lives there
UNSERVED = {"monitoring.coreos.com/v1"}


def dry_apply(real_cluster: RealCluster, obj: dict[str, Any]) -> None:
    """Server-side apply, strict, dry run: the API server validates and stores nothing."""
    path = object_path(obj) + (
        "?dryRun=All&fieldManager=vgpu-chart-check&fieldValidation=Strict&force=true"
    )
    real_cluster.admin.request("PATCH", path, obj, content_type="application/apply-patch+yaml")


def rendered(values: Path) -> list[dict[str, Any]]:
    import chart  # hack/chart.py, on sys.path through tests.deploy.test_chart

    out = chart.run_helm(
        "template", "vgpu", str(chart.CHART), "-n", NAMESPACE, "--kube-version", binary.kube_version(),
        "-f", str(values), "--set", f"namespace.name={NAMESPACE}",
    )  # fmt: skip
    return [d for d in yaml.safe_load_all(out) if d]


@pytest.mark.parametrize("values", VALUE_SETS, ids=lambda p: p.name.removesuffix("-values.yaml"))
def test_the_api_server_accepts_every_rendered_object(
    real_cluster: RealCluster, values: Path
) -> None:
    _helm_or_skip()
    create(
        real_cluster.admin,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
    )
    bogus = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": NAMESPACE},
        "datta": {},
    }
    with pytest.raises(ApiError, match="datta"):  # the check itself can fail
        dry_apply(real_cluster, bogus)
    refused, applied = [], 0
    for obj in rendered(values):
        if obj["apiVersion"] in UNSERVED or obj["kind"] == "Namespace":
            continue
        try:
            dry_apply(real_cluster, obj)
            applied += 1
        except ApiError as err:
            refused.append(f"{obj['kind']}/{obj['metadata']['name']}: {err}")
    assert refused == []
    assert applied >= 10
