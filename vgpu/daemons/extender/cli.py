"""`vgpu extender`: the kube-scheduler extender as a command.

    vgpu extender --tls-cert FILE --tls-key FILE --client-ca FILE [--port P] [--policy NAME] ...
    vgpu extender --insecure-http ...        (plain HTTP, local use only)

The assignment-signing key (shared with the node agents, from a Secret) is read from
`--assignment-key-file` or `$VGPU_ASSIGNMENT_KEY`; without either it refuses to start, unless
`--insecure-development-key` (local development only: anyone could forge assignments). Runs until
SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
from typing import TYPE_CHECKING, Any

from vgpu.api.resources import DEFAULT_DOMAIN, resource_names
from vgpu.core.errors import ConfigError
from vgpu.core.policy.specs import POLICY_NAMES
from vgpu.core.units import DEFAULT_MEMORY_UNIT_MIB
from vgpu.daemons.flags.keys import KEY_ENV, add_development_key_flag, load_assignment_key
from vgpu.flags import HelpFormatter, add_policy_flags, port_number, seconds

if TYPE_CHECKING:
    from vgpu.extender.server.tls import TlsFiles

log = logging.getLogger(__name__)
DEFAULT_PORT = 8443  # HTTPS, as the chart and daemonset/extender.yaml pass it
DEFAULT_PROBE_PORT = 8081  # plain HTTP, /healthz and /readyz only (the chart's probes)
DEFAULT_LEASE_NAMESPACE = "vgpu-system"  # where the manifests install the extender
GIL_SWITCH_S = 0.0005
"""The interpreter's thread switch interval in the extender (CPython's default is 5 ms). Filter
runs on the HTTP loop's thread inside kube-scheduler's serial cycle; when a request wakes that
thread while a bind worker or the watch thread runs Python, it waits up to this long for the GIL.
Measured with the real kube-scheduler at 1,000 nodes (docs/performance.md): what the extender adds to a pod's
scheduling time fell from a median 34 % to 27 % of kube-scheduler's own; the CPU cost of more
frequent switches is within the noise."""
DEFAULT_FILTER_BEST = 1  # the chart's extender.filterBest; docs/operations.md says why


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `extender` on an argparse subparsers object."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "extender",
        help="run the kube-scheduler extender (filter, prioritize, bind)",
        formatter_class=HelpFormatter,
    )
    _add_serving_flags(p)
    _add_placement_flags(p)
    _add_leader_flags(p)
    p.set_defaults(run=run)
    return p


def _add_serving_flags(p: argparse.ArgumentParser) -> None:
    """Where and how the verbs are served (HTTPS, client CA) and how the API is reached."""
    p.add_argument(
        "--port",
        type=port_number,
        default=DEFAULT_PORT,
        help="HTTPS port (plain HTTP with --insecure-http)",
    )
    p.add_argument(
        "--probe-port",
        type=port_number,
        default=DEFAULT_PROBE_PORT,
        help="plain-HTTP port serving only GET /healthz and /readyz, for kubelet probes: clients "
        "misbehaving on the main port cannot starve it; 0 turns it off (probes then go to --port)",
    )
    p.add_argument("--tls-cert", metavar="FILE", help="serving certificate (PEM)")
    p.add_argument("--tls-key", metavar="FILE", help="serving certificate's private key (PEM)")
    p.add_argument(
        "--client-ca",
        metavar="FILE",
        help="CA whose client certificates may call the verbs (kube-scheduler's tlsConfig)",
    )
    p.add_argument(
        "--insecure-http",
        action="store_true",
        help="serve plain HTTP without client authentication (local use only: anyone who "
        "reaches the port can bind pods)",
    )
    p.add_argument("--host", default="0.0.0.0", help="address to listen on")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then $KUBECONFIG)")


def _add_placement_flags(p: argparse.ArgumentParser) -> None:
    """Which policies place pods, the resource units and domain, and the assignment key."""
    add_policy_flags(
        p,
        policy=f"placement policy: one of {', '.join(POLICY_NAMES)}, or `default:key=value,...`",
        allow="a policy pods may ask for with the vgpu.io/policy annotation (repeatable; "
        "default: none besides --policy)",
    )
    p.add_argument(
        "--scheduler-name",
        action="append",
        default=[],
        metavar="NAME",
        help="a spec.schedulerName whose pods the extender serves (repeatable; default "
        "vgpu-scheduler): a filter for another scheduler's pod is answered but holds nothing",
    )
    p.add_argument(
        "--filter-best",
        type=int,
        default=DEFAULT_FILTER_BEST,
        metavar="N",
        help="filter passes only the nodes the policy scores best, ties included, at most N "
        "(kube-scheduler then needs no prioritize call: one call per pod); 0 passes every node "
        f"that fits, for a scheduler configuration with prioritizeVerb (default {DEFAULT_FILTER_BEST})",
    )
    p.add_argument(
        "--gang-timeout", type=float, default=60.0, help="seconds a gang reservation is held"
    )
    p.add_argument(
        "--memory-unit-mib",
        type=int,
        default=DEFAULT_MEMORY_UNIT_MIB,
        help="MiB per vgpu.io/memory block (as the node agents advertise)",
    )
    p.add_argument(
        "--resource-domain",
        default=DEFAULT_DOMAIN,
        help="domain of the extended resources and the node inventory annotation; the same "
        "value as the node agents' --resource-domain (default vgpu.io)",
    )
    p.add_argument("--assignment-key-file", help=f"HMAC key file (else ${KEY_ENV}; required)")
    add_development_key_flag(p)


def _add_leader_flags(p: argparse.ArgumentParser) -> None:
    """Leader election among replicas, and how long a gang bind may wait."""
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="elect one binding leader among replicas with a Lease (default on)",
    )
    p.add_argument(
        "--lease-namespace", default=DEFAULT_LEASE_NAMESPACE, help="namespace of the leader Lease"
    )
    p.add_argument("--lease-name", default="vgpu-extender", help="name of the leader Lease")
    p.add_argument(
        "--identity",
        default=os.environ.get("POD_NAME") or socket.gethostname(),
        help="this replica's name in the Lease ($POD_NAME, else the host name)",
    )
    p.add_argument("--bind-wait", type=float, default=3.0, help="seconds a gang bind may wait")
    p.add_argument(
        "--queues-config",
        metavar="NAMESPACE/NAME",
        default="",
        help="the queue ConfigMap (docs/queues.md): the leader releases pods held in queues",
    )


def _tls(args: argparse.Namespace) -> TlsFiles | None:
    """The TLS files, or None with --insecure-http (logged loudly)."""
    from vgpu.extender.server.tls import TlsFiles

    given = [args.tls_cert, args.tls_key, args.client_ca]
    if args.insecure_http:
        if any(given):
            raise ConfigError("--insecure-http: drop --tls-cert, --tls-key and --client-ca")
        log.warning(
            "serving plain HTTP (--insecure-http): anyone who reaches port %d can call the "
            "verbs, bind pods and feed requests; use only on a private host",
            args.port,
        )
        return None
    if not all(given):
        raise ConfigError(
            "the extender serves HTTPS: give --tls-cert, --tls-key and --client-ca "
            "(make them with hack/make-extender-certs.sh), or --insecure-http for local use"
        )
    return TlsFiles(args.tls_cert, args.tls_key, args.client_ca)


def _queues_config(text: str) -> tuple[str, str] | None:
    """`--queues-config NAMESPACE/NAME`, or None (no queue release loop)."""
    if not text:
        return None
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise ConfigError(f"--queues-config {text!r}: give NAMESPACE/NAME, e.g. vgpu/vgpu-queues")
    return namespace, name


def run(args: argparse.Namespace) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code."""
    from vgpu.adapters.kube.calls import KubeApi
    from vgpu.adapters.leader import LeaderConfig
    from vgpu.daemons.extender.daemon import DaemonConfig, ExtenderDaemon
    from vgpu.extender.config import ExtenderConfig

    # nan and inf were taken: a reservation that never expires, a gang bind that never ends
    seconds("--gang-timeout", args.gang_timeout, positive=True, example="60")
    seconds("--bind-wait", args.bind_wait, example="3")
    if args.memory_unit_mib <= 0:
        raise ConfigError("--memory-unit-mib: must be a positive number of MiB, e.g. 256")
    if args.filter_best < 0:
        raise ConfigError(f"--filter-best {args.filter_best}: give 0 (every node) or more")
    leader = (
        LeaderConfig(args.lease_namespace, args.lease_name, args.identity)
        if args.leader_elect
        else None
    )
    extender = ExtenderConfig(  # the flags' own values are checked first, then the transport
        policy=args.policy,
        gang_timeout=args.gang_timeout,
        memory_unit_mib=args.memory_unit_mib,
        names=resource_names(args.resource_domain),
        bind_wait=args.bind_wait,
        pod_policies=tuple(args.allow_pod_policy),
        filter_best=args.filter_best,
        schedulers=frozenset(args.scheduler_name or ["vgpu-scheduler"]),
    )
    config = DaemonConfig(
        tls=_tls(args),
        key=load_assignment_key(
            args.assignment_key_file, allow_development_key=args.insecure_development_key
        ),
        extender=extender,
        host=args.host,
        port=args.port,
        probe_port=args.probe_port or None,
        leader=leader,
        queues=_queues_config(args.queues_config),
    )
    api = KubeApi.from_environment(args.kubeconfig)
    daemon = ExtenderDaemon(api, config)
    sys.setswitchinterval(GIL_SWITCH_S)
    try:
        daemon.start()  # binds the port before anything else starts
    except OSError as e:
        raise ConfigError(
            f"--port: cannot listen on {args.host}:{args.port}: {e.strerror or e}; pick a free port"
        ) from e
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    log.info("stopping")
    daemon.stop()
    return 0
