#!/usr/bin/env bash
# Validate every Kubernetes manifest under daemonset/ (or the files/dirs given) offline:
#   * Kubernetes objects against the API's JSON schemas, strictly (unknown fields are errors),
#     with PyPI `kubernetes-validate` (schemas ship inside the package; no network), for each
#     version in $K8S_VERSIONS (default: 1.30.0, the oldest vgpu supports, and 1.37.0);
#   * KubeSchedulerConfiguration files (no published schema) for their required structure;
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
        name = (doc.get("metadata") or {}).get("name", "?")
        for version in VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                where = "/".join(str(p) for p in e.path) or "(top)"
                errors.append(f"{path}: {kind}/{name} invalid for {version} at {where}: {e.message}")
            except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.VersionNotSupportedError) as e:
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
