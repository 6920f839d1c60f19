"""Kafka client properties (the Java client's security keys) turned into what odradek's
clients take: librdkafka settings, an `ssl.SSLContext` and a SASL login.

Theory of operation. `client_security(props)` reads the security keys of a Kafka client
configuration (`security.protocol`, `sasl.*`, `ssl.*`, as Kafka's tools and Spark's Kafka
connector take them), checks every one (files are read, passwords tried) and returns a
`ClientSecurity`: `librdkafka` (confluent-kafka's names for them), `ssl_context` (for
odradek's blocking socket client) and `sasl`. Keys it does not handle are the caller's:
`HANDLED_KEYS` lists those it consumes, `JAVA_ONLY_KEYS` those that mean nothing outside
the JVM. Problems are `ConfigError`s naming the key, never a secret.

Two callers: the CLI's `--command-config FILE` (cli/client_config.py) and Spark's
`format("odradek")` `kafka.*` options (spark/options.py), so both map the same keys the
same way.

| key | librdkafka | socket client |
|---|---|---|
| `security.protocol` | same | TLS for SSL/SASL_SSL, SASL for SASL_* |
| `sasl.mechanism` | `sasl.mechanisms` | SaslHandshake mechanism |
| `sasl.jaas.config` (Plain/ScramLoginModule `username`, `password`) | `sasl.username`, `sasl.password` | PLAIN token or SCRAM exchange |
| `ssl.truststore.location`/`.type`/`.password`, `ssl.truststore.certificates` | PEM file: `ssl.ca.location`; PKCS12 or inline: `ssl.ca.pem` | the context's CAs |
| `ssl.keystore.location`/`.type`/`.password`, `ssl.key.password`, `ssl.keystore.key`/`.certificate.chain` | PEM file: `ssl.certificate.location` + `ssl.key.location`; PKCS12: `ssl.keystore.location`; inline: `ssl.certificate.pem` + `ssl.key.pem` | the client certificate |
| `ssl.endpoint.identification.algorithm` | `https` or `none` (empty) | host name check on or off |
| `ssl.cipher.suites` | OpenSSL names | the context's TLS 1.2 suites |
| `ssl.enabled.protocols` | - | lowest and highest TLS version |

An unset `ssl.truststore.type` or `ssl.keystore.type` (Kafka's default is JKS, which has
no Python reader) is PEM when the file holds PEM text, else PKCS12. Without a trust
store the system's CAs are trusted. librdkafka's own `sasl.username`/`sasl.password`
and `sasl.mechanisms` are accepted as well.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..broker_config_defs import BROKER_CONFIGS
from ..configdef import ConfigError
from . import keystores, tls
from .jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, JaasError, parse_jaas_config
from .oauthbearer import OAUTHBEARER_LOGIN_MODULE
from .sasl import SUPPORTED_MECHANISMS, SaslClientConfig

__all__ = ["HANDLED_KEYS", "JAVA_ONLY_KEYS", "SECURITY_PROTOCOLS", "ClientSecurity",
           "ConfigError", "client_security"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MAX_STORE_SNIFF_BYTES = 1024 * 1024

SASL_KEYS = ("security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.jaas.config",
             "sasl.username", "sasl.password")
# Keys consumed here: a caller never passes them to librdkafka as they are.
HANDLED_KEYS = frozenset((*SASL_KEYS, *tls.SSL_KEYS, "ssl.protocol"))
# The Java client's keys that mean nothing to either client here (JSSE and JAAS plumbing).
JAVA_ONLY_KEYS = frozenset({
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.provider",
    "ssl.secure.random.implementation", "ssl.engine.factory.class",
    "sasl.login.class", "sasl.login.callback.handler.class",
    "sasl.client.callback.handler.class", "sasl.kerberos.service.name",
})


@dataclass(frozen=True)
class ClientSecurity:
    """The security keys of one client configuration, for both kinds of client."""

    protocol: str = "PLAINTEXT"
    librdkafka: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslClientConfig | None = None

    def __repr__(self) -> str:  # librdkafka holds the password
        return f"ClientSecurity({self.protocol}, {self.sasl!r})"


def client_security(props: Mapping[str, str]) -> ClientSecurity:
    """Check and map the security keys of `props`; raises ConfigError naming the key."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError("security.protocol", f"expected one of {', '.join(SECURITY_PROTOCOLS)}",
                          protocol)
    rdkafka: dict[str, str] = {"security.protocol": protocol.lower()}
    sasl = _sasl(props) if protocol.startswith("SASL_") else None
    if sasl is not None and sasl.mechanism == "OAUTHBEARER":
        rdkafka.update({"sasl.mechanisms": "OAUTHBEARER",
                        "enable.sasl.oauthbearer.unsecure.jwt": "true",
                        "sasl.oauthbearer.config": f"principal={sasl.username} "
                        f"lifeSeconds={sasl.token_lifetime_s}"})
    elif sasl is not None:
        rdkafka.update({"sasl.mechanisms": sasl.mechanism, "sasl.username": sasl.username,
                        "sasl.password": sasl.password})
    ssl_context = None
    if protocol in tls.TLS_SECURITY_PROTOCOLS:
        settings = _ssl_settings(props)
        ssl_context = tls.client_context(settings)  # checks every file and password
        rdkafka.update(_librdkafka_ssl(settings))
    return ClientSecurity(protocol, MappingProxyType(rdkafka), ssl_context, sasl)


def _sasl(props: Mapping[str, str]) -> SaslClientConfig:
    key = "sasl.mechanism" if "sasl.mechanism" in props or "sasl.mechanisms" not in props \
        else "sasl.mechanisms"
    mechanism = props.get(key, "GSSAPI").strip().upper()  # GSSAPI: Kafka's default
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(key, f"odradek's clients speak {', '.join(SUPPORTED_MECHANISMS)}",
                          mechanism)
    username, password = props.get("sasl.username"), props.get("sasl.password")
    jaas = props.get("sasl.jaas.config")
    if jaas is not None:
        try:
            entry = parse_jaas_config(jaas)
        except JaasError as e:
            raise ConfigError("sasl.jaas.config", str(e)) from None
        if entry.login_module == OAUTHBEARER_LOGIN_MODULE and mechanism == "OAUTHBEARER":
            sub = entry.options.get("unsecuredLoginStringClaim_sub")
            if not sub:
                raise ConfigError("sasl.jaas.config", "OAUTHBEARER needs the "
                                  "unsecuredLoginStringClaim_sub option")
            try:
                lifetime_s = int(entry.options.get("unsecuredLoginLifetimeSeconds", "3600"))
            except ValueError:
                raise ConfigError("sasl.jaas.config",
                                  "unsecuredLoginLifetimeSeconds: not a number") from None
            return SaslClientConfig("OAUTHBEARER", sub, "", lifetime_s)
        if entry.login_module not in (PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE):
            raise ConfigError("sasl.jaas.config", f"expected {PLAIN_LOGIN_MODULE} or "
                              f"{SCRAM_LOGIN_MODULE}", entry.login_module)
        username = entry.options.get("username", username)
        password = entry.options.get("password", password)
    if not username or password is None:
        raise ConfigError("sasl.jaas.config", f"security.protocol SASL with {mechanism} needs "
                          "a username and a password: sasl.jaas.config="
                          f"{SCRAM_LOGIN_MODULE if mechanism != 'PLAIN' else PLAIN_LOGIN_MODULE}"
                          ' required username="..." password="...";')
    return SaslClientConfig(mechanism, username, password)


def _ssl_settings(props: Mapping[str, str]) -> tls.SslSettings:
    values: dict[str, Any] = {}
    for key in tls.SSL_KEYS:
        raw = props.get(key)
        values[key] = BROKER_CONFIGS[key].default if raw is None else BROKER_CONFIGS[key].parse(raw)
    for store in ("truststore", "keystore"):
        location = values[f"ssl.{store}.location"]
        if f"ssl.{store}.type" not in props and location is not None:
            values[f"ssl.{store}.type"] = _store_type(location, f"ssl.{store}.location")
        elif f"ssl.{store}.type" not in props:
            values[f"ssl.{store}.type"] = "PEM"  # inline PEM values, or nothing
    return tls.SslSettings("CLIENT", MappingProxyType(values), frozenset())


def _store_type(location: str, key: str) -> str:
    try:
        head = Path(location).read_bytes()[:MAX_STORE_SNIFF_BYTES]
    except OSError as e:
        raise ConfigError(key, f"cannot read {location}: {e.strerror or e}", location) from None
    return "PEM" if b"-----BEGIN " in head else "PKCS12"


def _librdkafka_ssl(s: tls.SslSettings) -> dict[str, str]:
    """librdkafka's names for the (already checked) ssl settings."""
    out: dict[str, str] = {}
    ca = keystores.trusted_certificates_pem(s)
    if ca is not None:
        location = s.get("ssl.truststore.location")
        if location is not None and str(s.get("ssl.truststore.type")).upper() == "PEM":
            out["ssl.ca.location"] = location
        else:
            out["ssl.ca.pem"] = ca
    kind = str(s.get("ssl.keystore.type")).upper()
    location = s.get("ssl.keystore.location")
    key_password = _reveal(s.get("ssl.key.password"))
    if s.get("ssl.keystore.key") is not None:
        out["ssl.key.pem"] = _reveal(s.get("ssl.keystore.key")) or ""
        out["ssl.certificate.pem"] = _reveal(s.get("ssl.keystore.certificate.chain")) or ""
    elif location is not None and kind == "PEM":
        # one file, key and chain: OpenSSL's PEM readers skip the other blocks
        out["ssl.certificate.location"] = out["ssl.key.location"] = location
    elif location is not None:
        out["ssl.keystore.location"] = location
        password = _reveal(s.get("ssl.keystore.password")) or key_password
        if password:
            out["ssl.keystore.password"] = password
    if key_password and "ssl.keystore.location" not in out:
        out["ssl.key.password"] = key_password
    algorithm = (s.get("ssl.endpoint.identification.algorithm") or "").strip().lower()
    out["ssl.endpoint.identification.algorithm"] = algorithm or "none"
    suites = [tls.openssl_cipher_name(c.strip()) for c in s.get("ssl.cipher.suites") if c.strip()]
    if suites:
        out["ssl.cipher.suites"] = ":".join(suites)
    return out


def _reveal(value: Any) -> str | None:
    if value is None:
        return None
    reveal = getattr(value, "reveal", None)
    return str(reveal()) if reveal is not None else str(value)
