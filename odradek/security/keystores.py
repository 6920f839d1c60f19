"""Key stores and trust stores for TLS contexts, from Kafka's `ssl.keystore.*` / `ssl.truststore.*`.

Key stores (`ssl.keystore.type`):
- PEM: `ssl.keystore.location` is one file with the private key and the certificate
  chain, or the chain and key are inline in `ssl.keystore.certificate.chain` and
  `ssl.keystore.key`; `ssl.key.password` decrypts an encrypted key.
- PKCS12: `ssl.keystore.location` + `ssl.keystore.password` (`ssl.key.password` is tried
  second, as a key entry may have its own).
- JKS (Kafka's default type) has no well-kept Python reader: refused with the keytool
  command that converts it.
Trust stores (`ssl.truststore.type`): PEM file or inline `ssl.truststore.certificates`,
PKCS12 file (`ssl.truststore.password`). No trust store: the system's CA certificates,
as the JVM's default trust store would be.

Python's ssl module loads keys from files only. Key material that is not already a PEM
file on disk (inline PEM, PKCS12) is handed to OpenSSL through an anonymous in-memory
file (`memfd_create`), so no decrypted key is ever written to a file system.

`SslSettings` is one listener's effective `ssl.*` values (security/tls.py resolves
them, overrides included); `load_keystore` and `load_truststore` put its stores into
an `ssl.SSLContext` that tls.py builds. Every problem is a ConfigError naming the key.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..broker_config_defs import LISTENER_OVERRIDE_PREFIX
from ..configdef import ConfigError

__all__ = ["SslSettings", "load_keystore", "load_truststore"]

_JKS_HINT = ("JKS key stores are not supported; convert it with `keytool -importkeystore "
             "-srckeystore <file>.jks -destkeystore <file>.p12 -deststoretype PKCS12` and "
             "set the type to PKCS12, or use PEM")


@dataclass(frozen=True)
class SslSettings:
    """The effective ssl.* values of one listener; `key_name` says where each came from."""

    listener: str
    values: Mapping[str, Any]
    overridden: frozenset[str]

    def get(self, key: str) -> Any:
        return self.values[key]

    def key_name(self, key: str) -> str:
        """The key as the user wrote it, for error messages."""
        if key in self.overridden:
            return f"{LISTENER_OVERRIDE_PREFIX}{self.listener.lower()}.{key}"
        return key



def load_keystore(ctx: ssl.SSLContext, s: SslSettings) -> bool:
    """Load the certificate chain and key into `ctx`; False when none is configured."""
    kind = str(s.get("ssl.keystore.type")).upper()
    location = s.get("ssl.keystore.location")
    chain, key = s.get("ssl.keystore.certificate.chain"), s.get("ssl.keystore.key")
    type_key = s.key_name("ssl.keystore.type")
    key_password = _reveal(s.get("ssl.key.password"))
    if chain is not None or key is not None:
        if kind != "PEM":
            raise ConfigError(type_key, "inline ssl.keystore.key and "
                              "ssl.keystore.certificate.chain need ssl.keystore.type=PEM", kind)
        if chain is None or key is None:
            missing = "ssl.keystore.key" if key is None else "ssl.keystore.certificate.chain"
            raise ConfigError(s.key_name(missing), "inline PEM key stores need both "
                              "ssl.keystore.key and ssl.keystore.certificate.chain")
        if location is not None:
            raise ConfigError(s.key_name("ssl.keystore.location"), "set either a key store "
                              "file or the inline PEM keys, not both", location)
        pem_key = _normalize_pem(_reveal(key) or "", s.key_name("ssl.keystore.key"))
        pem_chain = _normalize_pem(_reveal(chain) or "",
                                   s.key_name("ssl.keystore.certificate.chain"))
        _check_pem_key(pem_key, key_password, s, s.key_name("ssl.keystore.key"))
        with _memory_file((pem_chain + pem_key).encode()) as path:
            _load_chain(ctx, path, None, key_password, s, s.key_name("ssl.keystore.key"))
        return True
    if location is None:
        return False
    loc_key = s.key_name("ssl.keystore.location")
    data = _read(location, loc_key)
    if kind == "PEM":
        text = data.decode("ascii", errors="replace")
        _check_pem_key(_normalize_pem(text, loc_key, "PRIVATE KEY"), key_password, s, loc_key)
        _load_chain(ctx, location, None, key_password, s, loc_key)
    elif kind == "PKCS12":
        pem = _pkcs12_keystore_pem(data, s)
        with _memory_file(pem) as path:
            _load_chain(ctx, path, None, None, s, loc_key)
    elif kind == "JKS":
        raise ConfigError(type_key, _JKS_HINT, kind)
    else:
        raise ConfigError(type_key, "expected PEM or PKCS12", kind)
    return True


def _load_chain(ctx: ssl.SSLContext, certfile: str, keyfile: str | None,
                password: str | None, s: SslSettings, key: str) -> None:
    try:
        ctx.load_cert_chain(certfile, keyfile, password=password or "")
    except ssl.SSLError as e:
        raise ConfigError(key, f"cannot load the certificate chain and private key "
                          f"(wrong {s.key_name('ssl.key.password')}, or the key does not "
                          f"match the certificate?): {e}") from None


def _check_pem_key(pem: str, password: str | None, s: SslSettings, key: str) -> None:
    """Decrypt the PEM private key now, so a wrong or missing ssl.key.password is named."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    if "PRIVATE KEY-----" not in pem:
        raise ConfigError(key, "no PEM private key found")
    try:
        load_pem_private_key(pem.encode(), password.encode() if password else None)
    except TypeError as e:  # encrypted without a password, or a password for a clear key
        raise ConfigError(s.key_name("ssl.key.password"), str(e)) from None
    except ValueError as e:
        raise ConfigError(s.key_name("ssl.key.password"),
                          f"cannot decrypt the private key of {key} (wrong password?): {e}"
                          ) from None


def _pkcs12_keystore_pem(data: bytes, s: SslSettings) -> bytes:
    """The key and chain of a PKCS12 key store, as PEM (key unencrypted: it only goes
    to an in-memory file)."""
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        pkcs12,
    )

    store = s.get("ssl.keystore.password")
    passwords = [_reveal(store), _reveal(s.get("ssl.key.password"))]
    last: Exception | None = None
    for password in dict.fromkeys(passwords):  # store password first, then the key's
        try:
            key, cert, extra = pkcs12.load_key_and_certificates(
                data, password.encode() if password else None)
            break
        except (ValueError, TypeError) as e:
            last = e
    else:
        raise ConfigError(s.key_name("ssl.keystore.password"),
                          f"cannot open the PKCS12 key store {s.get('ssl.keystore.location')} "
                          f"(wrong password, or not a PKCS12 file?): {last}")
    if key is None or cert is None:
        raise ConfigError(s.key_name("ssl.keystore.location"),
                          "the PKCS12 key store holds no private key and certificate",
                          s.get("ssl.keystore.location"))
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    for c in [cert, *(extra or [])]:
        pem += c.public_bytes(Encoding.PEM)
    return pem


def load_truststore(ctx: ssl.SSLContext, s: SslSettings, server_side: bool) -> None:
    pem = trusted_certificates_pem(s)
    if pem is None:
        # the system's CAs, as the JVM's default trust store would be
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH if server_side is False
                               else ssl.Purpose.CLIENT_AUTH)
        return
    key = s.key_name("ssl.truststore.certificates"
                     if s.get("ssl.truststore.certificates") is not None
                     else "ssl.truststore.location")
    _load_cadata(ctx, pem, key)


def trusted_certificates_pem(s: SslSettings) -> str | None:
    """The trust store's CA certificates as PEM text (from the inline value, a PEM file
    or a PKCS12 store), or None when none is configured (the system's CAs apply). The
    CLI hands the same text to librdkafka (`ssl.ca.pem`)."""
    kind = str(s.get("ssl.truststore.type")).upper()
    type_key = s.key_name("ssl.truststore.type")
    inline = s.get("ssl.truststore.certificates")
    location = s.get("ssl.truststore.location")
    if inline is not None:
        if kind != "PEM":
            raise ConfigError(type_key, "inline ssl.truststore.certificates need "
                              "ssl.truststore.type=PEM", kind)
        key = s.key_name("ssl.truststore.certificates")
        return _normalize_pem(_reveal(inline) or "", key, "CERTIFICATE")
    if location is None:
        return None
    key = s.key_name("ssl.truststore.location")
    data = _read(location, key)
    if kind == "PEM":
        return _normalize_pem(data.decode("ascii", errors="replace"), key, "CERTIFICATE")
    if kind == "PKCS12":
        return _pkcs12_truststore_pem(data, s)
    if kind == "JKS":
        raise ConfigError(type_key, _JKS_HINT, kind)
    raise ConfigError(type_key, "expected PEM or PKCS12", kind)


def _pkcs12_truststore_pem(data: bytes, s: SslSettings) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    password = _reveal(s.get("ssl.truststore.password"))
    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except (ValueError, TypeError) as e:
        raise ConfigError(s.key_name("ssl.truststore.password"),
                          f"cannot open the PKCS12 trust store "
                          f"{s.get('ssl.truststore.location')} (wrong password, or not a "
                          f"PKCS12 file?): {e}") from None
    certs = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
    if not certs:
        raise ConfigError(s.key_name("ssl.truststore.location"),
                          "the PKCS12 trust store holds no certificates",
                          s.get("ssl.truststore.location"))
    return "".join(c.certificate.public_bytes(Encoding.PEM).decode() for c in certs)


def _load_cadata(ctx: ssl.SSLContext, pem: str, key: str) -> None:
    if "-----BEGIN CERTIFICATE-----" not in pem:
        raise ConfigError(key, "no PEM certificate found")
    try:
        ctx.load_verify_locations(cadata=pem)
    except ssl.SSLError as e:
        raise ConfigError(key, f"cannot load the trusted certificates: {e}") from None


def _read(location: str, key: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as e:
        raise ConfigError(key, f"cannot read {location}: {e.strerror or e}", location) from None


def _reveal(value: Any) -> str | None:
    if value is None:
        return None
    reveal = getattr(value, "reveal", None)
    return reveal() if reveal is not None else str(value)


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def _normalize_pem(text: str, key: str, must_have: str | None = None) -> str:
    """PEM blocks with their base64 re-wrapped: Kafka's inline PEM values are often one
    line (a .properties value continued with backslashes joins the lines with spaces)."""
    blocks = []
    for m in _PEM_BLOCK.finditer(text):
        label, body = m.group(1), re.sub(r"\s+", "", m.group(2))
        lines = [body[i:i + 64] for i in range(0, len(body), 64)]
        blocks.append(f"-----BEGIN {label}-----\n" + "\n".join(lines) +
                      f"\n-----END {label}-----\n")
    if not blocks:
        raise ConfigError(key, "no PEM block found (-----BEGIN ...----- ... -----END ...-----)")
    pem = "".join(blocks)
    if must_have is not None and must_have not in pem:
        raise ConfigError(key, f"no PEM {must_have} found")
    return pem


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str]:
    """A path OpenSSL can open that holds `data` without it touching a file system
    (memfd); a private temporary file where memfd is not available."""
    if hasattr(os, "memfd_create") and Path("/proc/self/fd").is_dir():
        fd = os.memfd_create("odradek-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="odradek-tls-") as d:  # pragma: no cover
        path = os.path.join(d, "store.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
