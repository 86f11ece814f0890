#!/usr/bin/env bash
# Build the real Prometheus server the real-cluster tier can scrape the test cluster with
# (tests/realk8s/test_real_prometheus.py), from its published module at the version pinned in
# hack/tools/prometheus/go.mod (no prebuilt download), into .bin/prometheus:
#   bash hack/build-prometheus.sh
# Opt-in, not part of .ci/run: the first build compiles the whole server (docs/performance.md,
# "CI and fuzzing", gives the time); the Go build cache makes the next ones take seconds. Built
# with `remove_all_sd`: only static and file targets, which is all the test uses, and far less
# to compile than every cloud's service discovery. A binary already built at the pinned version
# is kept. Exit status: 0 built or current, 3 Go missing, else go's.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null; then
  echo "build-prometheus: Go is not installed; install it (https://go.dev/dl)" >&2
  exit 3
fi
mkdir -p .bin
want="$(awk -v m=github.com/prometheus/prometheus '$1 == "require" && $2 == m {print $3; exit}
  $1 == m {print $2; exit}' hack/tools/prometheus/go.mod)"
if [ -x .bin/prometheus ] && [ "$(cat .bin/prometheus.version 2>/dev/null)" = "$want" ]; then
  echo "build-prometheus: .bin/prometheus is $want"
  exit 0
fi
start=$(date +%s)
(cd hack/tools/prometheus && go build -trimpath -tags remove_all_sd -ldflags "-s -w" \
  -o ../../../.bin/prometheus github.com/prometheus/prometheus/cmd/prometheus)
echo "$want" > .bin/prometheus.version
echo "build-prometheus: built .bin/prometheus $want in $(( $(date +%s) - start )) s"
