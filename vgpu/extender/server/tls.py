"""The extender's TLS: it serves HTTPS, and answers verbs only for a client (kube-scheduler)
that presents a certificate signed by the configured client CA.

kube-scheduler calls an extender over HTTPS with `enableHTTPS: true` and presents the client
certificate of its `tlsConfig` (`certFile`/`keyFile`, checking the extender's certificate against
`caFile`): KubeSchedulerConfiguration `Extender` / `ExtenderTLSConfig` in
k8s.io/kube-scheduler/config/v1/types.go. The handshake asks for a certificate without requiring
one (`CERT_OPTIONAL`), so kubelet probes (HTTPS, no client certificate) still reach /healthz and
/readyz; a certificate that is presented must chain to the client CA or the handshake fails, and
the HTTP server refuses verbs on a connection without one (`vgpu.extender.server.http1`).
`hack/make-extender-certs.sh` makes the certificates. `Reloader` picks up renewed files (a
Secret volume is updated in place): the serving certificate is replaced and a new client CA is
added for the handshakes that follow; a client CA that was removed stays trusted until restart.
"""

from __future__ import annotations

import logging
import os
import ssl
from dataclasses import dataclass

from vgpu.core.errors import ConfigError

log = logging.getLogger(__name__)


ALPN = ["h2", "http/1.1"]
"""Offered in this order: kube-scheduler's Go client asks for both and takes HTTP/2, which
multiplexes its calls on one connection (`vgpu.extender.server.http2`); other clients keep HTTP/1.1."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """PEM files: the serving certificate and key, and the CA that signs client certificates."""

    cert: str
    key: str
    client_ca: str


def server_context(files: TlsFiles) -> ssl.SSLContext:
    """A TLS 1.2+ server context verifying client certificates against `files.client_ca`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    load(context, files)
    context.verify_mode = ssl.CERT_OPTIONAL
    context.set_alpn_protocols(ALPN)
    return context


def load(context: ssl.SSLContext, files: TlsFiles) -> None:
    """Load (or reload) the files into `context`; raises `ConfigError` naming the flag."""
    try:
        context.load_cert_chain(files.cert, files.key)
    except (OSError, ssl.SSLError) as err:
        raise ConfigError(
            f"--tls-cert {files.cert} / --tls-key {files.key}: cannot be loaded ({err}); "
            "make them with hack/make-extender-certs.sh"
        ) from err
    try:
        context.load_verify_locations(cafile=files.client_ca)
    except (OSError, ssl.SSLError) as err:
        raise ConfigError(
            f"--client-ca {files.client_ca}: cannot be loaded ({err}); "
            "give the CA that signed kube-scheduler's client certificate"
        ) from err


class Reloader:
    """Reloads a context's files when they change (call `check` now and then)."""

    def __init__(self, context: ssl.SSLContext, files: TlsFiles) -> None:
        self.context, self.files = context, files
        self._seen = self._stamp()

    def _stamp(self) -> tuple[tuple[int, int, int], ...]:
        out = []
        for path in (self.files.cert, self.files.key, self.files.client_ca):
            try:
                st = os.stat(path)
                out.append((st.st_ino, st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((0, 0, 0))
        return tuple(out)

    def check(self) -> bool:
        """Reload if any file changed; whether it did. A half-written renewal is retried."""
        stamp = self._stamp()
        if stamp == self._seen:
            return False
        try:
            load(self.context, self.files)
        except ConfigError as err:
            log.warning("renewed TLS files not loaded yet: %s", err)
            return False
        self._seen = stamp
        log.info("TLS certificate files reloaded")
        return True
