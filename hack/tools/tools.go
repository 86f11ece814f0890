//go:build tools

// Package tools pins the Go tools the repository's checks build from their modules (no
// prebuilt downloads): `go build -o .bin/helm helm.sh/helm/v3/cmd/helm` from this directory.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
