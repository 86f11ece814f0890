#!/usr/bin/env bash
# Build the release artifacts into OUT (default dist/):
#   vgpu-VERSION-py3-none-any.whl, vgpu-VERSION.tar.gz   python -m build (wheel and sdist)
#   vgpu-VERSION.tgz                                      helm package charts/vgpu
#   kubectl-inspect-vgpu-VERSION.tar.gz                   the krew archive: a launcher and the wheel
#   inspect-vgpu.yaml                                     the krew plugin manifest (its sha256)
#   SHA256SUMS
# The versions must agree (pyproject.toml's version = the chart's version = its appVersion),
# or nothing is built. The image is built apart (docs/operations.md, "Release artifacts").
# Usage: hack/release.sh [OUT] [--repo OWNER/NAME] [--base-url URL]: the GitHub repository
# (default vgpu/vgpu) names the manifest's homepage and, unless --base-url says otherwise, where
# the archive is published (the GitHub release of the tag vVERSION). Needs the `build` and
# `wheel` packages and helm (.bin/helm, $HELM or PATH); PYTHON picks the interpreter (default
# .venv/bin/python, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
out=dist
base_url=""
repo=vgpu/vgpu
while [ $# -gt 0 ]; do
  case "$1" in
    --base-url) base_url="${2:?--base-url needs a URL}"; shift 2 ;;
    --repo) repo="${2:?--repo needs OWNER/NAME}"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "release.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) out="$1"; shift ;;
  esac
done
python="${PYTHON:-}"
[ -n "$python" ] || { [ -x .venv/bin/python ] && python=.venv/bin/python || python=python3; }
helm="${HELM:-}"
[ -n "$helm" ] || { [ -x .bin/helm ] && helm=.bin/helm || helm="$(command -v helm || true)"; }
[ -n "$helm" ] || { echo "release.sh: helm not found: run bash hack/build-tools.sh or set HELM" >&2; exit 1; }

version="$("$python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml","rb"))["project"]["version"])')"
chart_version="$(sed -n 's/^version: *//p' charts/vgpu/Chart.yaml)"
app_version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/vgpu/Chart.yaml)"
if [ "$chart_version" != "$version" ] || [ "$app_version" != "$version" ]; then
  echo "release.sh: versions disagree: pyproject.toml $version, charts/vgpu/Chart.yaml version" \
    "$chart_version and appVersion $app_version; set all three to the release's version" >&2
  exit 1
fi
base_url="${base_url:-https://github.com/$repo/releases/download/v$version}"

mkdir -p "$out"
out="$(cd "$out" && pwd)"
echo "== wheel and sdist (python -m build)"
log="$(mktemp)"
run_quiet() { "$@" >"$log" 2>&1 || { cat "$log" >&2; echo "release.sh: failed: $*" >&2; exit 1; }; }
run_quiet "$python" -m build --no-isolation --wheel --sdist --outdir "$out" .
echo "== chart (helm package)"
run_quiet "$helm" package charts/vgpu --destination "$out"

echo "== krew archive and manifest"
wheel="vgpu-$version-py3-none-any.whl"
stage="$(mktemp -d)"
trap 'rm -rf "$stage" "$log"' EXIT
cp "$out/$wheel" LICENSE "$stage/"
# The launcher runs the report from the wheel on the user's python3 (>= 3.11); the live cluster
# needs its `kubernetes` and `PyYAML` packages (the manifest's caveats say so).
cat > "$stage/kubectl-inspect-vgpu" <<LAUNCHER
#!/bin/sh
# kubectl inspect vgpu, from the vgpu $version wheel beside this file.
self="\$0"
while [ -h "\$self" ]; do
  link="\$(readlink "\$self")"
  case "\$link" in /*) self="\$link" ;; *) self="\$(dirname "\$self")/\$link" ;; esac
done
exec "\${VGPU_PYTHON:-python3}" -c 'import sys; sys.path.insert(0, sys.argv.pop(1)); from vgpu.inspect.cli import main; sys.exit(main(sys.argv[1:]))' "\$(dirname "\$self")/$wheel" "\$@"
LAUNCHER
chmod 0755 "$stage/kubectl-inspect-vgpu"
archive="kubectl-inspect-vgpu-$version.tar.gz"
# Reproducible: fixed order, owner and times, so the sha256 depends on the contents only.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$stage" -cf - \
  kubectl-inspect-vgpu LICENSE "$wheel" | gzip -n > "$out/$archive"
sha="$(sha256sum "$out/$archive" | cut -d' ' -f1)"
cat > "$out/inspect-vgpu.yaml" <<MANIFEST
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: inspect-vgpu
spec:
  version: "v$version"
  homepage: https://github.com/$repo
  shortDescription: "Show how vgpu shares the cluster's GPUs"
  description: |
    Per node and GPU the cores and memory vgpu has granted, what is bound but not yet admitted,
    unhealthy GPUs, waiting pods and why, gangs and fair queues (--queues), and real use from
    Prometheus (--prometheus). Read-only; also renders saved snapshots (--fake-cluster).
  caveats: |
    Needs python3 >= 3.11 on PATH (or VGPU_PYTHON). To read a live cluster it also needs the
    Python packages kubernetes and PyYAML: pip install 'kubernetes>=37,<38' PyYAML
    Reading needs the ClusterRole vgpu-inspect bound to you (the chart creates it).
    Krew links it as kubectl-inspect_vgpu: run it as `kubectl inspect-vgpu` (a
    kubectl-inspect-vgpu on PATH, as pip installs it, is `kubectl inspect vgpu`).
  platforms:
  - selector:
      matchExpressions:
      - key: os
        operator: In
        values: [linux, darwin]
    uri: $base_url/$archive
    sha256: $sha
    bin: kubectl-inspect-vgpu
MANIFEST
(cd "$out" && sha256sum "vgpu-$version.tgz" "$wheel" "vgpu-$version.tar.gz" "$archive" \
  inspect-vgpu.yaml > SHA256SUMS)
echo "release $version in $out:"
(cd "$out" && ls -1)
