//go:build tools

// Package prometheus pins the real Prometheus server the real-cluster tier scrapes the test
// cluster with (tests/realk8s/test_real_prometheus.py): built from its published module by
// hack/build-prometheus.sh, never downloaded prebuilt.
package prometheus

import _ "github.com/prometheus/prometheus/cmd/prometheus"
