"""The Helm chart is the one source of the deployment files; this renders and checks it.

    python hack/chart.py generate   # rewrite daemonset/ (kubectl apply -k) from charts/vgpu
    python hack/chart.py check      # exit 1 when daemonset/ differs from what generate writes
    python hack/chart.py ci OUT     # helm lint + template for every value set in
                                    # charts/vgpu/ci/*-values.yaml and Kubernetes version, into OUT,
                                    # each validated strictly against that version's schemas;
                                    # every alert and dashboard query parsed as PromQL; the
                                    # CRD objects and scheduler configs decoded strictly

daemonset/ is `helm template` of the chart with hack/manifests-values.yaml, one file per
template (`# Source:` tells which); the scheduler's ConfigMap is written as the two
KubeSchedulerConfiguration files that daemonset/kustomization.yaml generates it from, so each can
be read and validated on its own. The kustomization.yaml files are written by hand.

Helm: $HELM, else .bin/helm (hack/build-tools.sh builds it from its Go module), else PATH. PromQL:
.bin/promql, strict decoding: .bin/strictkinds (the same script builds both from their projects'
Go modules).
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "vgpu"
MANIFESTS = ROOT / "daemonset"
VALUES = ROOT / "hack" / "manifests-values.yaml"
# The scheduler image tag daemonset/ pins (the chart follows the cluster); `helm template` without
# --kube-version renders it too (vgpu.schedulerVersion; tests/deploy/test_chart.py compares).
KUBE_VERSION = "v1.31.4"
CI_KUBE_VERSIONS = ("v1.30.0", "v1.37.0")
HEADER = (
    "# Generated from charts/vgpu by `python hack/chart.py generate`: edit the chart, not this.\n"
)
SCHEDULER_CONFIG = "templates/scheduler/configmap.yaml"
# Helm prints objects in install order; a file reads better workload first, as it was written.
KIND_ORDER = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
              "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
              "DaemonSet", "Deployment", "Service", "PodDisruptionBudget")  # fmt: skip


class ChartError(Exception):
    """Helm missing or failing; the message says which and how to fix it."""


def helm() -> str:
    """The helm binary to use."""
    for candidate in (os.environ.get("HELM"), str(ROOT / ".bin" / "helm"), shutil.which("helm")):
        if candidate and Path(candidate).is_file():
            return candidate
    raise ChartError(
        "helm not found: run `bash hack/build-tools.sh` (builds .bin/helm) or set HELM"
    )


def tool(name: str) -> str:
    """A Go tool built by hack/build-tools.sh."""
    path = ROOT / ".bin" / name
    if not path.is_file():
        raise ChartError(f".bin/{name} not found: run `bash hack/build-tools.sh`")
    return str(path)


def run_helm(*args: str) -> str:
    """Run helm, returning stdout; its error output becomes the ChartError."""
    done = subprocess.run([helm(), *args], capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise ChartError(f"helm {' '.join(args)}:\n{done.stderr.strip()}")
    return done.stdout


def template(values: Path, kube_version: str, namespace: str = "vgpu-system") -> str:
    """`helm template` of the chart with one value file."""
    return run_helm(
        "template", "vgpu", str(CHART), "--namespace", namespace,
        "--kube-version", kube_version, "-f", str(values),
    )  # fmt: skip


def by_source(rendered: str) -> dict[str, str]:
    """Rendered text per template path (`templates/...`), documents joined with `---`."""
    parts: dict[str, list[tuple[int, str]]] = {}
    for chunk in rendered.split("\n---\n"):
        chunk = chunk.removeprefix("---\n")
        first, _, body = chunk.partition("\n")
        if not first.startswith("# Source: vgpu/"):
            if chunk.strip():
                raise ChartError(f"unexpected helm output without a Source line: {chunk[:80]!r}")
            continue
        source = first.removeprefix("# Source: vgpu/")
        kind = (yaml.safe_load(body) or {}).get("kind", "")
        rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
        parts.setdefault(source, []).append((rank, body.strip("\n") + "\n"))
    return {
        src: "---\n".join(text for _, text in sorted(docs, key=lambda d: d[0]))
        for src, docs in parts.items()
    }


def manifest_files(rendered: str) -> dict[str, str]:
    """daemonset/ file path -> content, as `generate` writes them."""
    files: dict[str, str] = {}
    for source, text in by_source(rendered).items():
        if source == SCHEDULER_CONFIG:
            config_map = yaml.safe_load(text)
            for name, data in config_map["data"].items():
                files[f"scheduler/{name}"] = HEADER + data
        else:
            files[source.removeprefix("templates/")] = HEADER + text
    return files


def expected() -> dict[str, str]:
    return manifest_files(template(VALUES, KUBE_VERSION))


def generated_on_disk() -> dict[str, str]:
    """The files in daemonset/ that carry the generated header."""
    return {
        str(p.relative_to(MANIFESTS)): p.read_text()
        for p in MANIFESTS.rglob("*.yaml")
        if p.read_text().startswith(HEADER)
    }


def generate() -> int:
    for path in generated_on_disk():
        (MANIFESTS / path).unlink()
    for path, text in expected().items():
        target = MANIFESTS / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote daemonset/{path}")
    return 0


def check() -> int:
    want, have = expected(), generated_on_disk()
    problems = []
    for path in sorted(set(want) | set(have)):
        if want.get(path) != have.get(path):
            diff = difflib.unified_diff(
                (have.get(path) or "").splitlines(keepends=True),
                (want.get(path) or "").splitlines(keepends=True),
                f"daemonset/{path}",
                f"chart render of {path}",
            )
            problems.append("".join(diff))
    for problem in problems:
        print(problem)
    if problems:
        print("daemonset/ differs from the chart: run `python hack/chart.py generate`")
        return 1
    print(f"daemonset/ matches charts/vgpu ({len(want)} files)")
    return 0


def queries(rendered: list[dict[str, object]]) -> list[str]:
    """Every PromQL expression of the rendered PrometheusRules and the Grafana dashboard, with
    Grafana's variables replaced by values Prometheus accepts."""
    exprs = [
        str(rule["expr"])
        for doc in rendered
        if doc.get("kind") == "PrometheusRule"
        for group in doc["spec"]["groups"]  # type: ignore[index]
        for rule in group["rules"]
    ]
    dashboard = json.loads((CHART / "dashboards" / "vgpu.json").read_text())
    for panel in dashboard["panels"]:
        exprs += [target["expr"] for target in panel.get("targets", [])]
    grafana = {"$__rate_interval": "5m", "$node": ".*"}
    for variable, value in grafana.items():
        exprs = [e.replace(variable, value) for e in exprs]
    return exprs


def check_promql(exprs: list[str]) -> str:
    """Parse every expression with Prometheus's parser; the tool's report, or ChartError."""
    done = subprocess.run(
        [tool("promql")],
        input="".join(json.dumps(e) + "\n" for e in exprs),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise ChartError(f"PromQL that does not parse:\n{done.stdout}{done.stderr}")
    return done.stdout.strip()


def check_strict(paths: list[Path]) -> str:
    """Decode the CRD objects and scheduler configs in `paths` into their Go types, strictly."""
    done = subprocess.run(
        [tool("strictkinds"), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise ChartError(f"objects that do not decode strictly:\n{done.stdout}{done.stderr}")
    return done.stdout.strip().splitlines()[-1]


def validate(rendered: Path, version: str) -> str:
    """hack/validate-manifests.sh on one render, against the schemas of the version it was
    rendered for (strict: unknown fields are errors)."""
    env = {**os.environ, "PYTHON": sys.executable, "K8S_VERSIONS": version.removeprefix("v")}
    done = subprocess.run(
        ["bash", str(ROOT / "hack" / "validate-manifests.sh"), str(rendered)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise ChartError(f"{rendered.name} does not validate:\n{done.stdout}{done.stderr}")
    return done.stdout.strip().splitlines()[-1]


def ci_versions(values: Path) -> list[str]:
    """The Kubernetes versions to render a value set for: a first-line comment
    `# ci-kube-versions: v1.37.0 ...` narrows the default (a feature needing a newer cluster)."""
    first = values.read_text().partition("\n")[0]
    if first.startswith("# ci-kube-versions:"):
        return first.partition(":")[2].split()
    return list(CI_KUBE_VERSIONS)


def ci(out: Path) -> int:
    """Lint and render every CI value set for each Kubernetes version into `out`."""
    value_sets = sorted((CHART / "ci").glob("*-values.yaml"))
    rules: list[dict[str, object]] = []
    for values in value_sets:
        print(run_helm("lint", str(CHART), "--strict", "-f", str(values)).strip().splitlines()[-1])
        for version in ci_versions(values):
            target = out / f"{values.name.removesuffix('-values.yaml')}-{version}"
            target.mkdir(parents=True, exist_ok=True)
            rendered = template(values, version)
            rules += [
                d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "PrometheusRule"
            ]
            for source, text in by_source(rendered).items():
                name = source.removeprefix("templates/").replace("/", "_")
                (target / name).write_text(text)
            print(validate(target, version))
    print(f"rendered {len(value_sets)} value sets into {out}")
    if not rules:
        raise ChartError("no value set in charts/vgpu/ci enables metrics.prometheusRule")
    print(check_promql(queries(rules)))
    print(check_strict(sorted(out.rglob("*.yaml")) + sorted(MANIFESTS.rglob("*.yaml"))))
    return 0


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["generate"]:
            return generate()
        if argv[:1] == ["check"]:
            return check()
        if argv[:1] == ["ci"] and len(argv) == 2:
            return ci(Path(argv[1]))
    except ChartError as err:
        print(f"chart: {err}", file=sys.stderr)
        return 2
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
