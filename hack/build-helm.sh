#!/usr/bin/env bash
# Build .bin/helm from Helm's Go module (the version pinned in hack/tools/go.mod) with the Go
# toolchain: no prebuilt download. Skips the build when .bin/helm is already that version.
# Prints the build time. Exit status: 0 built or current, 3 Go missing, else go's.
set -euo pipefail
cd "$(dirname "$0")/.."
want="$(awk '$1 == "helm.sh/helm/v3" || $2 == "helm.sh/helm/v3" {print $NF}' hack/tools/go.mod | head -1)"
if [ -x .bin/helm ] && .bin/helm version --template '{{.Version}}' 2>/dev/null | grep -qx "$want"; then
  echo "build-helm: .bin/helm is $want"
  exit 0
fi
if ! command -v go >/dev/null; then
  echo "build-helm: Go is not installed; install it (https://go.dev/dl) to build helm $want" >&2
  exit 3
fi
mkdir -p .bin
start=$(date +%s)
(cd hack/tools && go build -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$want" \
  -o ../../.bin/helm helm.sh/helm/v3/cmd/helm)
echo "build-helm: built .bin/helm $want in $(( $(date +%s) - start )) s"
