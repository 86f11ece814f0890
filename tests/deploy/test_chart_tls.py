"""The extender's certificates the chart generates: ECDSA P-256 keys, and a real mutual-TLS
handshake between the two Secrets' halves (extender side, vgpu-scheduler side) that succeeds.

kube-scheduler resumes no TLS session and keeps at most 2 idle connections to an extender, so it
does full handshakes often; P-256 keeps each one cheap (bench/extender_tls_cost.py prints the
figures). Needs helm like test_chart.py: skipped without it, failed without it under CI=true.
"""

from __future__ import annotations

import base64
import contextlib
import ssl
from pathlib import Path

import pytest

from tests.deploy.test_chart import _helm_or_skip, find, render

# DER of the OIDs id-ecPublicKey (1.2.840.10045.2.1) and prime256v1 (1.2.840.10045.3.1.7): both
# are in a certificate's SubjectPublicKeyInfo exactly when its key is ECDSA P-256.
EC_PUBLIC_KEY = bytes.fromhex("06072a8648ce3d0201")
P256 = bytes.fromhex("06082a8648ce3d030107")


@pytest.fixture(autouse=True)
def _needs_helm() -> None:
    _helm_or_skip()


def _write_secrets(tmp_path: Path) -> tuple[Path, Path]:
    """The two generated Secrets' files, as their volumes would hold them."""
    objs = render("everything")
    dirs = []
    for name in ("vgpu-extender-tls", "vgpu-scheduler-extender-client"):
        d = tmp_path / name
        d.mkdir()
        for key, value in find(objs, "Secret", name)["data"].items():
            (d / key).write_bytes(base64.b64decode(value))
        dirs.append(d)
    return dirs[0], dirs[1]


def test_every_generated_key_is_ecdsa_p256(tmp_path: Path) -> None:
    server, client = _write_secrets(tmp_path)
    for d in (server, client):
        assert (d / "tls.key").read_text().startswith("-----BEGIN EC PRIVATE KEY-----")
    for cert in ("tls.crt", "client-ca.crt"):
        der = ssl.PEM_cert_to_DER_cert((server / cert).read_text())
        assert EC_PUBLIC_KEY in der and P256 in der, f"vgpu-extender-tls {cert}"
    for cert in ("tls.crt", "ca.crt"):
        der = ssl.PEM_cert_to_DER_cert((client / cert).read_text())
        assert EC_PUBLIC_KEY in der and P256 in der, f"vgpu-scheduler-extender-client {cert}"


def test_the_two_halves_complete_a_mutual_tls_handshake(tmp_path: Path) -> None:
    """Each side verifies the other against the CA it was given: the chain, the extender's
    Service name, and a client certificate the extender demands."""
    server, client = _write_secrets(tmp_path)
    srv = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    srv.load_cert_chain(server / "tls.crt", server / "tls.key")
    srv.load_verify_locations(server / "client-ca.crt")
    srv.verify_mode = ssl.CERT_REQUIRED
    cli = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cli.load_cert_chain(client / "tls.crt", client / "tls.key")
    cli.load_verify_locations(client / "ca.crt")
    wires = (ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO())
    s = srv.wrap_bio(wires[0], wires[1], server_side=True)
    c = cli.wrap_bio(wires[2], wires[3], server_hostname="vgpu-extender.gpu-sharing.svc")
    for _ in range(10):  # each step moves one flight across; TLS 1.3 needs three
        for end, inbox, peer_outbox in ((c, wires[2], wires[1]), (s, wires[0], wires[3])):
            inbox.write(peer_outbox.read())
            with contextlib.suppress(ssl.SSLWantReadError):
                end.do_handshake()
    for end, name in ((s, "vgpu-scheduler"), (c, "vgpu-extender")):
        peer = end.getpeercert()
        assert peer is not None and peer["subject"] == ((("commonName", name),),)
