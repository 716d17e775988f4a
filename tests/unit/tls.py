"""A certificate authority of the test's own, and an OpenSandbox-shaped HTTPS server it signed."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.unit.loopback_http import answering_every_get

# What the lifecycle API answers to a listing of sandboxes when it has none.
EMPTY_LISTING = {
    "items": [],
    "pagination": {
        "page": 1,
        "pageSize": 1,
        "totalItems": 0,
        "totalPages": 0,
        "hasNextPage": False,
    },
}


@dataclass(frozen=True)
class PrivateAuthority:
    ca_pem: Path
    server_cert_pem: Path
    server_key_pem: Path


def make_authority(directory: Path) -> PrivateAuthority:
    """A CA, and a certificate it signed for 127.0.0.1, written into ``directory`` as PEM."""
    now = datetime.datetime.now(datetime.UTC)
    valid = {
        "not_valid_before": now - datetime.timedelta(minutes=5),
        "not_valid_after": now + datetime.timedelta(days=1),
    }

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "opensandbox test CA")])
    ca_cert = (
        x509.CertificateBuilder(subject_name=ca_name, issuer_name=ca_name, **valid)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder(
            subject_name=x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]),
            issuer_name=ca_name,
            **valid,
        )
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )

    authority = PrivateAuthority(
        ca_pem=directory / "ca.pem",
        server_cert_pem=directory / "server.pem",
        server_key_pem=directory / "server-key.pem",
    )
    authority.ca_pem.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    authority.server_cert_pem.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    authority.server_key_pem.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return authority


@contextmanager
def https_lifecycle_api(authority: PrivateAuthority) -> Iterator[int]:
    """An HTTPS server on loopback that answers every GET with an empty sandbox listing."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(authority.server_cert_pem, authority.server_key_pem)
    body = json.dumps(EMPTY_LISTING).encode()
    with answering_every_get(200, "application/json", body, tls=context) as port:
        yield port
