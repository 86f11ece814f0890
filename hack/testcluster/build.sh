#!/usr/bin/env bash
# Build the test cluster's one binary (hack/testcluster) with the Kubernetes version stamped in:
#   bash hack/testcluster/build.sh [OUTPUT]      (default hack/testcluster/bin/testcluster)
#   bash hack/testcluster/build.sh --ldflags     print the linker flags only
# A plain `go build` leaves component-base's and client-go's version at their placeholder
# (v0.0.0-master+$Format:%H$): `kubectl version` then fails and a chart's kubeVersion check
# refuses the cluster. Kubernetes' own build (hack/lib/version.sh) sets them with -X; this does
# the same from the k8s.io/kubernetes version pinned in go.mod, so the cluster reports it.
set -euo pipefail
cd "$(dirname "$0")"
version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v[0-9]/ {print $2; exit}' go.mod)"
if [[ ! "$version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]]; then
  echo "build.sh: no k8s.io/kubernetes vX.Y.Z in hack/testcluster/go.mod" >&2
  exit 1
fi
major="${BASH_REMATCH[1]}" minor="${BASH_REMATCH[2]}"
flags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  flags+=" -X $pkg.gitTreeState=clean"
done
if [ "${1:-}" = "--ldflags" ]; then
  echo "$flags"
  exit 0
fi
exec go build -buildvcs=false -ldflags="$flags" -o "${1:-bin/testcluster}" .
