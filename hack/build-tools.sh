#!/usr/bin/env bash
# Build the Go tools the chart checks use, from their modules with the Go toolchain (no prebuilt
# download), into .bin/:
#   .bin/helm    helm.sh/helm/v3/cmd/helm at the version in hack/tools/go.mod;
#   .bin/promql  Prometheus's PromQL parser (hack/tools/promql) for the alerts and dashboard, and
#                its engine (`promql eval`) for the alert-rule tests;
#   .bin/strictkinds  strict decoding of ServiceMonitor, PodMonitor, PrometheusRule and
#                KubeSchedulerConfiguration into their projects' Go types (hack/tools/strictkinds).
# A tool already built at that version is kept. Prints each build's time.
# Exit status: 0 built or current, 3 Go missing, else go's.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null; then
  echo "build-tools: Go is not installed; install it (https://go.dev/dl) to build helm" >&2
  exit 3
fi
mkdir -p .bin

want="$(awk '$1 == "helm.sh/helm/v3" || $2 == "helm.sh/helm/v3" {print $NF}' hack/tools/go.mod | head -1)"
if [ -x .bin/helm ] && .bin/helm version --template '{{.Version}}' 2>/dev/null | grep -qx "$want"; then
  echo "build-tools: .bin/helm is $want"
else
  start=$(date +%s)
  (cd hack/tools && go build -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$want" \
    -o ../../.bin/helm helm.sh/helm/v3/cmd/helm)
  echo "build-tools: built .bin/helm $want in $(( $(date +%s) - start )) s"
fi

start=$(date +%s)
(cd hack/tools/promql && go build -trimpath -o ../../../.bin/promql .)
echo "build-tools: built .bin/promql in $(( $(date +%s) - start )) s"

start=$(date +%s)
(cd hack/tools/strictkinds && go build -trimpath -o ../../../.bin/strictkinds .)
echo "build-tools: built .bin/strictkinds in $(( $(date +%s) - start )) s"
