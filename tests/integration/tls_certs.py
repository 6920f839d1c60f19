"""Certificates for TLS tests, generated per test with trustme and cryptography.

`TlsFiles(dir)` writes a CA, a server certificate for 127.0.0.1/localhost, a client
certificate (CN=client,OU=eng,O=odradek) signed by that CA, a client signed by another
CA (the truststore refuses it), and the same key material as PKCS12 key/trust stores,
an encrypted PEM key and inline (single-line) PEM values, as Kafka configs hold them.
"""

from __future__ import annotations

from pathlib import Path

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

PASSWORD = "changeit"


class TlsFiles:
    def __init__(self, base: Path) -> None:
        self.dir = base
        base.mkdir(parents=True, exist_ok=True)
        self.ca = trustme.CA(organization_name="odradek test CA")
        self.rogue_ca = trustme.CA(organization_name="someone else")
        self.server = self.ca.issue_cert("127.0.0.1", "localhost", common_name="broker",
                                         organization_name="odradek")
        self.client = self.ca.issue_cert("client.example", common_name="client",
                                         organization_unit_name="eng",
                                         organization_name="odradek")
        self.rogue = self.rogue_ca.issue_cert("rogue.example", common_name="rogue")
        self.ca_pem = self._write("ca.pem", self.ca.cert_pem.bytes())
        self.server_pem = self._write("server.pem",
                                      self.server.private_key_and_cert_chain_pem.bytes())
        self.client_key = self._write("client.key", self.client.private_key_pem.bytes())
        self.client_cert = self._write("client.crt", b"".join(
            p.bytes() for p in self.client.cert_chain_pems))
        self.client_pem = self._write("client.pem",
                                      self.client.private_key_and_cert_chain_pem.bytes())
        self.rogue_key = self._write("rogue.key", self.rogue.private_key_pem.bytes())
        self.rogue_cert = self._write("rogue.crt", b"".join(
            p.bytes() for p in self.rogue.cert_chain_pems))
        self.server_p12 = self._write("server.p12", self._pkcs12(self.server, PASSWORD))
        self.client_p12 = self._write("client.p12", self._pkcs12(self.client, PASSWORD))
        self.truststore_p12 = self._write("truststore.p12", pkcs12.serialize_key_and_certificates(
            b"ca", None, None, [self._cert(self.ca.cert_pem.bytes())],
            serialization.BestAvailableEncryption(PASSWORD.encode())))
        key = serialization.load_pem_private_key(self.server.private_key_pem.bytes(), None)
        self.server_encrypted_key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(PASSWORD.encode())).decode()
        self.server_chain_pem = b"".join(p.bytes() for p in self.server.cert_chain_pems).decode()
        self.server_encrypted_pem = self._write(
            "server-encrypted.pem",
            (self.server_encrypted_key_pem + self.server_chain_pem).encode())

    def _write(self, name: str, data: bytes) -> Path:
        path = self.dir / name
        path.write_bytes(data)
        return path

    @staticmethod
    def _cert(pem: bytes) -> x509.Certificate:
        return x509.load_pem_x509_certificate(pem)

    def _pkcs12(self, leaf: trustme.LeafCert, password: str) -> bytes:
        key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
        chain = [self._cert(p.bytes()) for p in leaf.cert_chain_pems]
        return pkcs12.serialize_key_and_certificates(
            b"odradek", key, chain[0], chain[1:],  # type: ignore[arg-type]
            serialization.BestAvailableEncryption(password.encode()))

    # -- broker configs -------------------------------------------------------------------

    def server_pem_config(self, prefix: str = "", client_auth: str = "none") -> dict[str, str]:
        """A listener's keys for the PEM key store and CA trust store (`prefix`:
        'listener.name.ssl.' for per-listener overrides)."""
        return {
            f"{prefix}ssl.keystore.type": "PEM",
            f"{prefix}ssl.keystore.location": str(self.server_pem),
            f"{prefix}ssl.truststore.type": "PEM",
            f"{prefix}ssl.truststore.location": str(self.ca_pem),
            f"{prefix}ssl.client.auth": client_auth,
        }

    def server_pkcs12_config(self, client_auth: str = "none") -> dict[str, str]:
        return {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.server_p12),
            "ssl.keystore.password": PASSWORD,
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(self.truststore_p12),
            "ssl.truststore.password": PASSWORD,
            "ssl.client.auth": client_auth,
        }

    def librdkafka(self, client_cert: bool = False, rogue: bool = False) -> dict[str, str]:
        """confluent-kafka / kcat settings for the SSL listener."""
        conf = {"security.protocol": "SSL", "ssl.ca.location": str(self.ca_pem)}
        if client_cert or rogue:
            conf["ssl.certificate.location"] = str(self.rogue_cert if rogue else self.client_cert)
            conf["ssl.key.location"] = str(self.rogue_key if rogue else self.client_key)
        return conf


def one_line(pem: str) -> str:
    """A PEM value as Kafka's inline configs often hold it: one line, spaces for newlines."""
    return " ".join(pem.split())
