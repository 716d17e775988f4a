"""The local cluster's certificates: who each one names, who signed it, what it may be used for."""

import ipaddress
import stat

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from dev.kube import pki

NODE = "test-node"
NODE_IP = "192.0.2.7"
SERVICE_IP = "10.214.0.1"


@pytest.fixture
def pki_dir(tmp_path):
    directory = tmp_path / "pki"
    pki.ensure_pki(directory, NODE, NODE_IP, SERVICE_IP)
    return directory


def _cert(pki_dir, stem):
    return x509.load_pem_x509_certificate((pki_dir / f"{stem}.crt").read_bytes())


def _names(cert, oid):
    return [attribute.value for attribute in cert.subject.get_attributes_for_oid(oid)]


def test_every_certificate_is_signed_by_the_cluster_ca(pki_dir):
    ca = _cert(pki_dir, "ca")
    stems = ["apiserver", *(identity.file_stem for identity in pki.client_identities(NODE))]
    for stem in stems:
        cert = _cert(pki_dir, stem)
        cert.verify_directly_issued_by(ca)  # raises if another key signed it
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_the_apiserver_answers_to_loopback_the_service_address_and_the_node(pki_dir):
    cert = _cert(pki_dir, "apiserver")
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    ips = {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    assert ips == {"127.0.0.1", SERVICE_IP, NODE_IP}
    assert "kubernetes.default.svc.cluster.local" in names.get_values_for_type(x509.DNSName)
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]


def test_client_certificates_name_the_users_and_groups_rbac_expects(pki_dir):
    kubelet = _cert(pki_dir, "kubelet")
    assert _names(kubelet, NameOID.COMMON_NAME) == [f"system:node:{NODE}"]
    assert _names(kubelet, NameOID.ORGANIZATION_NAME) == ["system:nodes"]
    admin = _cert(pki_dir, "admin")
    assert _names(admin, NameOID.ORGANIZATION_NAME) == ["system:masters"]
    scheduler = _cert(pki_dir, "scheduler")
    assert _names(scheduler, NameOID.COMMON_NAME) == ["system:kube-scheduler"]
    assert _names(scheduler, NameOID.ORGANIZATION_NAME) == []
    for cert in (kubelet, admin, scheduler):
        usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
        with pytest.raises(x509.ExtensionNotFound):
            cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)


def test_private_keys_are_readable_by_their_owner_only(pki_dir):
    keys = sorted(pki_dir.glob("*.key"))
    assert {key.stem for key in keys} >= {"ca", "sa", "apiserver", "kubelet", "admin"}
    for key in keys:
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key.name


def test_a_second_run_keeps_the_ca_and_service_account_key_and_reissues_the_rest(pki_dir):
    ca_before = (pki_dir / "ca.crt").read_bytes()
    sa_before = (pki_dir / "sa.key").read_bytes()
    apiserver_before = _cert(pki_dir, "apiserver")
    pki.ensure_pki(pki_dir, NODE, "192.0.2.8", SERVICE_IP)
    assert (pki_dir / "ca.crt").read_bytes() == ca_before
    assert (pki_dir / "sa.key").read_bytes() == sa_before
    apiserver = _cert(pki_dir, "apiserver")
    assert apiserver.serial_number != apiserver_before.serial_number
    names = apiserver.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("192.0.2.8") in names.get_values_for_type(x509.IPAddress)
    apiserver.verify_directly_issued_by(_cert(pki_dir, "ca"))
