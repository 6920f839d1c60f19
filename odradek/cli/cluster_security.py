"""`odradek cluster up --sasl-ssl`: what a SASL_SSL development cluster needs.

Theory of operation. `prepare(dir)` makes, once, under DIR/security (mode 0700):

- `ca.pem`, a self-signed CA, and `server.pem`, one key and certificate for every
  node (SANs 127.0.0.1 and localhost, so host names are checked), made with
  `cryptography` (EC P-256, valid 825 days);
- `secrets.json` (0600): the brokers' PLAIN password (user `broker`: brokers log in
  to each other and to the controllers with it) and the SCRAM-SHA-512 password of
  user `admin`, both random unless `--admin-password` is given on the first run;
- `server.properties` (0600): the security keys every node reads (`-c`), so no
  secret is on a command line: SASL_SSL on every listener, PLAIN between nodes,
  SCRAM-SHA-256/512 for clients, StandardAuthorizer, super users `broker` and
  `admin`;
- `admin.properties` (0600): the client properties for `--command-config` (or any
  Kafka client): SASL_SSL, SCRAM-SHA-512 as `admin`, the CA as a PEM trust store.

A second `cluster up` on the same DIR reuses all of it. The admin's credential
goes into the controllers' metadata log dirs as a bootstrap record
(`bootstrap_admin`, as `odradek storage format --add-scram` does); the first active
controller commits it to its empty metadata log.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odradek.cli.storage import scram_bootstrap_records
from odradek.metadata.bootstrap import write_bootstrap_records

LISTENER = "SASL_SSL"  # the client and inter-broker listener's name
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class ClusterSecurity:
    dir: Path
    broker_password: str
    admin_password: str

    @property
    def server_properties(self) -> Path:
        return self.dir / "server.properties"

    @property
    def admin_properties(self) -> Path:
        return self.dir / "admin.properties"

    @property
    def ca(self) -> Path:
        return self.dir / "ca.pem"


def prepare(base: Path, admin_password: str | None = None) -> ClusterSecurity:
    """Make (or reuse) the certificates, secrets and properties files under base/security."""
    d = base / "security"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    secrets_file = d / "secrets.json"
    if secrets_file.exists():
        saved = json.loads(secrets_file.read_text(encoding="utf-8"))
        broker_pw, admin_pw = saved["broker"], saved["admin"]
    else:
        broker_pw = secrets.token_urlsafe(18)
        admin_pw = admin_password or secrets.token_urlsafe(18)
        _write_private(secrets_file, json.dumps({"broker": broker_pw, "admin": admin_pw}))
    if not (d / "server.pem").exists():
        ca_pem, server_pem = _certificates()
        (d / "ca.pem").write_bytes(ca_pem)
        _write_private(d / "server.pem", server_pem.decode())
    sec = ClusterSecurity(d, broker_pw, admin_pw)
    _write_private(sec.server_properties, _properties(server_settings(sec)))
    _write_private(sec.admin_properties, _properties({
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="admin" password="{admin_pw}";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(sec.ca),
    }))
    return sec


def server_settings(sec: ClusterSecurity) -> dict[str, str]:
    jaas = (f'{PLAIN} required username="broker" password="{sec.broker_password}" '
            f'user_broker="{sec.broker_password}";')
    return {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        f"listener.name.{LISTENER.lower()}.plain.sasl.jaas.config": jaas,
        "listener.name.controller.plain.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(sec.dir / "server.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(sec.ca),
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:broker;User:admin",
    }


def bootstrap_admin(sec: ClusterSecurity, metadata_dir: Path) -> None:
    """The admin's SCRAM-SHA-512 credential (salted) as a bootstrap record of a
    controller's metadata log dir; ignored once that log has records."""
    records = scram_bootstrap_records(
        [f"SCRAM-SHA-512=[name=admin,password={sec.admin_password}]"])
    write_bootstrap_records(metadata_dir, records)


def _properties(settings: dict[str, str]) -> str:
    # Java properties: `\` escapes; PEM paths and JAAS values have none to spare
    return "".join(f"{k}={v.replace(chr(92), chr(92) * 2)}\n" for k, v in settings.items())


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def _certificates() -> tuple[bytes, bytes]:
    """(CA certificate PEM, server key + certificate + CA PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def issue(subject: x509.Name, public_key: Any, extensions: list[tuple[Any, bool]]
              ) -> x509.Certificate:
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_name)
                   .public_key(public_key).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=825)))
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(ca_key, hashes.SHA256())

    def name(common_name: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "odradek dev"),
                          x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name("odradek cluster up CA")
    ca = issue(ca_name, ca_key.public_key(), [
        (x509.BasicConstraints(ca=True, path_length=0), True),
        (x509.KeyUsage(False, False, False, False, False, True, True, False, False), True)])
    key = ec.generate_private_key(ec.SECP256R1())
    cert = issue(name("broker"), key.public_key(), [
        (x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                      x509.DNSName("localhost")]), False),
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                ExtendedKeyUsageOID.CLIENT_AUTH]), False)])
    pem = serialization.Encoding.PEM
    ca_pem = ca.public_bytes(pem)
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return ca_pem, key_pem + cert.public_bytes(pem) + ca_pem
