"""Server certificates that fail verification the ways a provider's can, made with ``cryptography``:

- ``self_signed``: a certificate that is its own issuer (a test server, a forgotten internal endpoint);
- ``Authority.issue``: a leaf signed by a CA of the test's own, for some host names and a validity window,
  so a test gets a certificate for the wrong host, an expired one, or one from a CA nobody trusts.

Each writes PEM files into a directory and returns them as ``Issued`` (``egress_servers.server_context`` reads
them), so the same certificates serve scripted servers and the TLS forwarder in front of the simulator.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.clients.http1.egress_servers import Issued

DAY = datetime.timedelta(days=1)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _names(hosts: tuple[str, ...]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for host in hosts:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            entries.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(entries)


def _write(directory: Path, name: str, certificate: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Issued:
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return Issued(cert_path, key_path)


def self_signed(directory: Path, name: str, *, hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> Issued:
    """A server certificate for ``hosts`` signed by its own key; trusting it means naming its file."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    certificate = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(_now() - DAY).not_valid_after(_now() + DAY)
        # CA:TRUE lets the certificate be its own trust anchor (a ca_bundle or SSL_CERT_FILE naming it).
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_names(hosts), critical=False)
        .sign(key, hashes.SHA256())
    )
    return _write(directory, name, certificate, key)


class Authority:
    """A CA of the test's own; ``cert`` is its certificate (PEM), for a ``ca_bundle`` that trusts it."""

    def __init__(self, directory: Path, name: str = "tls-failures CA") -> None:
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        certificate = (
            x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(_now() - 30 * DAY).not_valid_after(_now() + 30 * DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.cert = _write(directory, name.replace(" ", "-"), certificate, self.key).cert

    def issue(self, name: str, *, hosts: tuple[str, ...], expired: bool = False) -> Issued:
        """A server certificate for ``hosts``; ``expired``: its validity ended yesterday."""
        key = ec.generate_private_key(ec.SECP256R1())
        start, end = (_now() - 10 * DAY, _now() - DAY) if expired else (_now() - DAY, _now() + DAY)
        certificate = (
            x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(_names(hosts), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        return _write(self.directory, name, certificate, key)
