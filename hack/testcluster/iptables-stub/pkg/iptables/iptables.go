// Package iptables declares what Kubernetes 1.38's kubelet calls in
// sigs.k8s.io/iptables-wrappers/pkg/iptables (pkg/kubelet/kubelet_network_linux.go), for a host
// without iptables: NewBestEffort finds no client, so nothing else is ever called.
package iptables

import (
	"context"
	"errors"
	"time"
)

// Chain names an iptables chain.
type Chain string

// Table names an iptables table.
type Table string

// RulePosition says where EnsureRule puts a rule.
type RulePosition string

// Protocol is an IP family as the wrappers name it.
type Protocol string

// Mode says which iptables binary a client runs.
type Mode string

// The names the kubelet uses.
const (
	ChainInput       Chain        = "INPUT"
	ChainOutput      Chain        = "OUTPUT"
	TableFilter      Table        = "filter"
	TableMangle      Table        = "mangle"
	TableNAT         Table        = "nat"
	Append           RulePosition = "-A"
	Prepend          RulePosition = "-I"
	ProtocolIPv4     Protocol     = "IPv4"
	ProtocolIPv6     Protocol     = "IPv6"
	UseInstalledMode Mode         = "installed"
)

// ErrNoIPTables is what a client would answer here: the host has none.
var ErrNoIPTables = errors.New("iptables stand-in: this host has no iptables")

// Interface is the part of an iptables client the kubelet calls.
type Interface interface {
	EnsureChain(ctx context.Context, table Table, chain Chain) (bool, error)
	EnsureRule(ctx context.Context, position RulePosition, table Table, chain Chain, args ...string) (bool, error)
	IsIPv6() bool
	Protocol() Protocol
	Monitor(ctx context.Context, canary Chain, tables []Table, reload func(), interval time.Duration)
}

// NewBestEffort returns a client per IP family whose iptables works: none on this host.
func NewBestEffort(_ context.Context, _ Mode) map[Protocol]Interface {
	return map[Protocol]Interface{}
}
