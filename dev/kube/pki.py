"""The cluster's certificates: a CA of its own, the apiserver's serving certificate, a client
certificate for each component and for the admin, and the service-account signing key.

The CA and the service-account key are made once and kept: tokens already handed to pods and
the ``kube-root-ca.crt`` every namespace holds depend on them. The other certificates are
issued again by every ``up`` (P-256 keys take milliseconds), so a changed node address or
service range never leaves a stale name in them.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_NAME = "opensandbox-provider local cluster CA"
# Long enough that no local cluster outlives its CA; the leaves are re-issued by every `up`.
CA_VALIDITY = datetime.timedelta(days=3650)
LEAF_VALIDITY = datetime.timedelta(days=365)
# Clock skew between issuing and the first check must not make a fresh certificate "not yet valid".
BACKDATE = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class ClientIdentity:
    """Who a client certificate names: Kubernetes reads the user from CN, groups from O."""

    file_stem: str
    user: str
    groups: tuple[str, ...] = ()


def client_identities(node_name: str) -> tuple[ClientIdentity, ...]:
    """The client certificates the cluster needs, each named as RBAC and the Node authorizer
    expect it."""
    return (
        ClientIdentity("admin", "kubernetes-admin", ("system:masters",)),
        ClientIdentity("kubelet", f"system:node:{node_name}", ("system:nodes",)),
        ClientIdentity("controller-manager", "system:kube-controller-manager"),
        ClientIdentity("scheduler", "system:kube-scheduler"),
        # The apiserver's identity towards the kubelet, for logs, exec and port-forward.
        ClientIdentity(
            "apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)
        ),
    )


def apiserver_names(service_ip: str, node_ip: str) -> tuple[list[str], list[str]]:
    """DNS names and IP addresses the apiserver answers to, as clients inside and outside
    address it."""
    dns = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"]
    dns.append("kubernetes.default.svc.cluster.local")
    return dns, ["127.0.0.1", service_ip, node_ip]


def ensure_pki(pki_dir: Path, node_name: str, node_ip: str, service_ip: str) -> None:
    """Writes the CA and service-account key if missing, and issues every leaf certificate."""
    pki_dir.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = _ensure_ca(pki_dir)
    if not (pki_dir / "sa.key").exists():
        sa_key = ec.generate_private_key(ec.SECP256R1())
        _write_key(pki_dir / "sa.key", sa_key)
        (pki_dir / "sa.pub").write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
    dns, ips = apiserver_names(service_ip, node_ip)
    _issue(pki_dir, "apiserver", ca_cert, ca_key, x509.Name([_cn("kube-apiserver")]), dns, ips)
    for identity in client_identities(node_name):
        subject = x509.Name([_cn(identity.user), *(_o(group) for group in identity.groups)])
        _issue(pki_dir, identity.file_stem, ca_cert, ca_key, subject)


def _ensure_ca(pki_dir: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = pki_dir / "ca.crt", pki_dir / "ca.key"
    if cert_path.exists() and key_path.exists():
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        return x509.load_pem_x509_certificate(cert_path.read_bytes()), key
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([_cn(CA_NAME)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_key(key_path, key)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def _issue(
    pki_dir: Path,
    stem: str,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    dns: list[str] | None = None,
    ips: list[str] | None = None,
) -> None:
    """A leaf signed by the CA: a serving certificate when it has names, else a client one."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    serving = bool(dns or ips)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if serving else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + LEAF_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if serving:
        names = [x509.DNSName(n) for n in dns or []]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in dict.fromkeys(ips or [])]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write_key(pki_dir / f"{stem}.key", key)
    (pki_dir / f"{stem}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    # Created private, so no other user can read the key even for a moment.
    path.unlink(missing_ok=True)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
        out.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )


def _cn(value: str) -> x509.NameAttribute:
    return x509.NameAttribute(NameOID.COMMON_NAME, value)


def _o(value: str) -> x509.NameAttribute:
    return x509.NameAttribute(NameOID.ORGANIZATION_NAME, value)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
