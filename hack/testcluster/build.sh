#!/usr/bin/env bash
# Build the test cluster's one binary (hack/testcluster) with the Kubernetes version stamped in:
#   bash hack/testcluster/build.sh [--k8s 1.MINOR] [OUTPUT]   (default hack/testcluster/bin/testcluster)
#   bash hack/testcluster/build.sh [--k8s 1.MINOR] --ldflags  print the linker flags only
# Each Kubernetes minor version the tier runs against is pinned in its own module file, built
# from the published modules with `go build -modfile` (the source is the same): go.mod pins one,
# v1.<minor>.mod (with v1.<minor>.sum) any other. Without --k8s the default below is built;
# moving the default is that one line.
#
# A plain `go build` leaves component-base's and client-go's version at their placeholder
# (v0.0.0-master+$Format:%H$): `kubectl version` then fails and a chart's kubeVersion check
# refuses the cluster. Kubernetes' own build (hack/lib/version.sh) sets them with -X; this does
# the same from the k8s.io/kubernetes version pinned in the module file, so the cluster reports
# it (a pre-release such as v1.38.0-beta.0 gets the minor "38+", as version.sh gives it).
set -euo pipefail
caller="$PWD"  # an OUTPUT path is the caller's, relative or not
cd "$(dirname "$0")"
k8s=1.37
if [ "${1:-}" = "--k8s" ]; then
  k8s="${2:-}"
  shift 2
fi
modfile="v$k8s.mod"
if grep -Eq "^\s*k8s\.io/kubernetes v$k8s\.[0-9]" go.mod; then
  modfile=go.mod
elif [ ! -f "$modfile" ]; then
  echo "build.sh: --k8s $k8s: neither go.mod nor hack/testcluster/$modfile pins it" >&2
  exit 1
fi
version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v[0-9]/ {print $2; exit}' "$modfile")"
if [[ ! "$version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+(-[0-9A-Za-z.]+)?$ ]]; then
  echo "build.sh: no k8s.io/kubernetes vX.Y.Z in hack/testcluster/$modfile" >&2
  exit 1
fi
major="${BASH_REMATCH[1]}" minor="${BASH_REMATCH[2]}${BASH_REMATCH[3]:++}"
flags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  flags+=" -X $pkg.gitTreeState=clean"
done
if [ "${1:-}" = "--ldflags" ]; then
  echo "$flags"
  exit 0
fi
# A newer release may need a newer Go than the one on PATH (1.38 needs 1.27): the go command
# then fetches that toolchain from the module proxy, as it does for a go.mod naming it.
needed="$(awk '$1 == "go" {print "go" $2; exit}' "$modfile")"
have="$(go env GOVERSION)"
if [ "$(printf '%s\n%s\n' "$needed" "$have" | sort -V | tail -1)" != "$have" ]; then
  export GOTOOLCHAIN="$needed"
fi
# The default pin builds read-only; another pin may still lack go.sum lines for modules the
# proxy served late (-mod=mod adds them, checked against the checksum database as always).
mode=readonly
[ "$modfile" = go.mod ] || mode=mod
output="${1:-bin/testcluster}"
[ -z "${1:-}" ] || [[ "$1" = /* ]] || output="$caller/$1"
exec go build -buildvcs=false -modfile="$modfile" -mod="$mode" -ldflags="$flags" -o "$output" .
