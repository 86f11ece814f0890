#!/usr/bin/env bash
# The real-Kubernetes test cluster by hand (docs/testing.md):
#   hack/testcluster.sh up DIR [--nodes NAME:GPUS,...] [--chart]
#                                                       build hack/testcluster, start, print cluster.json;
#                                                       --chart: vgpu installed by `helm install` (.bin/helm)
#   hack/testcluster.sh down DIR                        stop what `up` started
# Needs Go and root (each kubelet runs in its own mount namespace). Keep DIR short (unix sockets).
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
[ -x "$python" ] || python=python3
exec "$python" -m tests.realk8s "$@"
