#!/usr/bin/env bash
# Validate every Kubernetes manifest under daemonset/ (or the files/dirs given) offline:
#   * Kubernetes objects against the API's JSON schemas, strictly (unknown fields are errors),
#     with PyPI `kubernetes-validate` (schemas ship inside the package; no network), for each
#     version in $K8S_VERSIONS (default: 1.30.0, the oldest vgpu supports, and 1.37.0);
#   * KubeSchedulerConfiguration files (no published schema) for their required structure, also
#     when they are a ConfigMap's data (the Helm chart's render);
#   * Prometheus Operator objects (ServiceMonitor, PodMonitor, PrometheusRule; CRDs, no schema in
#     kubernetes-validate) for the fields they need and no unknown spec fields;
#   * kustomization.yaml files: every resource / generator file they name exists, and every
#     manifest in their directory tree is named by some kustomization.
# Options: --allow-missing PREFIX  tolerate missing kustomization references under PREFIX
#          (relative to daemonset/; used while a part of the tree is written on another branch).
# Env: PYTHON (default: python3) must have kubernetes-validate and PyYAML installed.
# Exit status: 0 all valid, 1 invalid manifests, 3 kubernetes-validate missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c "import kubernetes_validate, yaml" 2>/dev/null; then
  echo "validate-manifests: $PYTHON lacks kubernetes-validate (pip install kubernetes-validate)" >&2
  exit 3
fi
exec "$PYTHON" - "$@" <<'PY'
import os
import sys
from pathlib import Path

import kubernetes_validate
import yaml
from kubernetes_validate.utils import VersionNotSupportedError

ROOT = Path("daemonset")
VERSIONS = os.environ.get("K8S_VERSIONS", "1.30.0 1.37.0").split()
args = sys.argv[1:]
allow_missing = []
while "--allow-missing" in args:
    i = args.index("--allow-missing")
    allow_missing.append(args[i + 1].rstrip("/") + "/")
    del args[i : i + 2]
targets = [Path(a) for a in args] or [ROOT]
files = sorted({f for t in targets for f in ([t] if t.is_file() else t.rglob("*.yaml"))})
errors = []
named = set()


def check_kustomization(path, doc):
    base = path.parent
    refs = list(doc.get("resources") or [])
    for gen in (doc.get("configMapGenerator") or []) + (doc.get("secretGenerator") or []):
        refs += [f.split("=", 1)[-1] for f in gen.get("files") or []]
    for ref in refs:
        target = (base / ref).resolve()
        named.add(target)
        if not target.exists():
            rel = os.path.relpath(base / ref, ROOT)
            if any(rel.startswith(p) for p in allow_missing):
                print(f"SKIP {path}: {ref} not present (allowed missing)")
            else:
                errors.append(f"{path}: names {ref}, which does not exist")


def check_scheduler_config(path, doc):
    if doc.get("apiVersion") != "kubescheduler.config.k8s.io/v1":
        errors.append(f"{path}: apiVersion must be kubescheduler.config.k8s.io/v1")
    profiles = doc.get("profiles")
    if not isinstance(profiles, list) or not all(isinstance(p, dict) and p.get("schedulerName") for p in profiles):
        errors.append(f"{path}: profiles must be a list of objects with schedulerName")
    for i, ext in enumerate(doc.get("extenders") or []):
        if not isinstance(ext, dict) or not ext.get("urlPrefix"):
            errors.append(f"{path}: extenders[{i}].urlPrefix is required")


MONITORING = {
    "ServiceMonitor": ({"selector", "endpoints"}, {"selector", "endpoints", "namespaceSelector", "jobLabel"}),
    "PodMonitor": ({"selector", "podMetricsEndpoints"}, {"selector", "podMetricsEndpoints", "namespaceSelector", "jobLabel"}),
    "PrometheusRule": ({"groups"}, {"groups"}),
}


def check_monitoring(path, doc):
    kind, name = doc["kind"], doc["metadata"]["name"]
    need, allowed = MONITORING.get(kind, (set(), None))
    spec = doc.get("spec") or {}
    if allowed is None or doc["apiVersion"] != "monitoring.coreos.com/v1":
        errors.append(f"{path}: {kind}/{name}: unknown monitoring.coreos.com kind or version")
        return
    if need - set(spec) or set(spec) - allowed:
        errors.append(f"{path}: {kind}/{name}: spec needs {sorted(need)}, allows {sorted(allowed)}")
    for ep in spec.get("endpoints", []) + spec.get("podMetricsEndpoints", []):
        if not ep.get("port"):
            errors.append(f"{path}: {kind}/{name}: every endpoint needs a named port")
    for group in spec.get("groups", []):
        for rule in group.get("rules") or [None]:
            if not isinstance(rule, dict) or not rule.get("expr") or not (rule.get("alert") or rule.get("record")):
                errors.append(f"{path}: {kind}/{name}: group {group.get('name')}: a rule needs expr and alert/record")


def check_config_map(path, doc):
    for key, value in (doc.get("data") or {}).items():
        if key.endswith((".yaml", ".yml")) and "KubeSchedulerConfiguration" in value:
            check_scheduler_config(f"{path} ({doc['metadata']['name']}: {key})", yaml.safe_load(value))


checked = 0
kustomized = []
for path in files:
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except yaml.YAMLError as e:
        errors.append(f"{path}: not valid YAML: {e}")
        continue
    for doc in docs:
        if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
            errors.append(f"{path}: a document without apiVersion/kind")
            continue
        checked += 1
        kind = doc["kind"]
        if kind == "Kustomization":
            kustomized.append(path)
            check_kustomization(path, doc)
            continue
        if doc["apiVersion"].startswith("kubescheduler.config.k8s.io/"):
            check_scheduler_config(path, doc)
            continue
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            check_monitoring(path, doc)
            continue
        if kind == "ConfigMap":
            check_config_map(path, doc)
        name = (doc.get("metadata") or {}).get("name", "?")
        for version in VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                where = "/".join(str(p) for p in e.path) or "(top)"
                errors.append(f"{path}: {kind}/{name} invalid for {version} at {where}: {e.message}")
            except (kubernetes_validate.SchemaNotFoundError, VersionNotSupportedError) as e:
                errors.append(f"{path}: {kind}/{name}: {e}")

for path in files:
    if path.name == "kustomization.yaml" or not any(k.parent in path.parents for k in kustomized):
        continue
    if path.resolve() not in named:
        errors.append(f"{path}: not named by any kustomization.yaml (add it or move it out)")

for e in errors:
    print(f"ERROR {e}")
status = "FAILED" if errors else "ok"
print(f"validate-manifests: {checked} documents in {len(files)} files, Kubernetes {', '.join(VERSIONS)}: {status}")
sys.exit(1 if errors else 0)
PY
