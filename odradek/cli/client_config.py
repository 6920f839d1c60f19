"""`--command-config FILE`: a Kafka client properties file, for every CLI command that
talks to a broker, as Kafka's tools take it.

Theory of operation. The CLI has two kinds of client: confluent-kafka (topics, groups,
produce, consume, users), configured with librdkafka's settings, and the blocking socket
client `transactions.Connection` (transactions, partitions, quotas, acls), which needs an
`ssl.SSLContext` and a SASL login. `load(path)` reads the file once, checks every
security key and builds both: `CommandConfig.librdkafka` and `CommandConfig.ssl_context` /
`.sasl`. argparse calls it (`type=`) while parsing the command line, so a bad file or
value stops the command before it connects anywhere: argparse's message, naming the
file and the key (never a secret), and exit code 2.

Keys (Kafka's client keys, verbatim):

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
and `sasl.mechanisms` are accepted as well; any other key is handed to librdkafka as it
is (a key librdkafka does not know is refused here) and ignored by the socket client;
keys only the Java client has (e.g. `ssl.keymanager.algorithm`) are ignored.
"""

from __future__ import annotations

import argparse
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from odradek.broker_config_defs import BROKER_CONFIGS
from odradek.config import parse_properties
from odradek.configdef import ConfigError
from odradek.security import keystores, tls
from odradek.security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasError,
    parse_jaas_config,
)
from odradek.security.sasl import SUPPORTED_MECHANISMS, SaslClientConfig

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MAX_FILE_BYTES = 1024 * 1024  # a client properties file is a few lines

# Keys handled here: never passed to librdkafka as they are.
_SASL_KEYS = ("security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.jaas.config",
              "sasl.username", "sasl.password")
_HANDLED = frozenset((*_SASL_KEYS, *tls.SSL_KEYS, "ssl.protocol"))
# The Java client's keys that mean nothing to either client here (JSSE and JAAS plumbing).
JAVA_ONLY_KEYS = frozenset({
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.provider",
    "ssl.secure.random.implementation", "ssl.engine.factory.class",
    "sasl.login.class", "sasl.login.callback.handler.class",
    "sasl.client.callback.handler.class", "sasl.kerberos.service.name",
})


class CommandConfigError(ValueError):
    """A command-config file that cannot be used; the message names file and key."""


@dataclass(frozen=True)
class CommandConfig:
    """What one `--command-config FILE` says, for both kinds of client."""

    path: str
    security_protocol: str = "PLAINTEXT"
    librdkafka: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslClientConfig | None = None

    def __repr__(self) -> str:  # librdkafka holds the password
        return f"CommandConfig({self.path}, {self.security_protocol}, {self.sasl!r})"


def load(path: str) -> CommandConfig:
    """Read and check a client properties file; raises CommandConfigError."""
    where = path
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise CommandConfigError(f"{where}: cannot read it: {e.strerror or e}") from None
    if len(data) > MAX_FILE_BYTES:
        raise CommandConfigError(f"{where}: larger than {MAX_FILE_BYTES} bytes; is it a "
                                 "client properties file?")
    try:
        props = parse_properties(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise CommandConfigError(f"{where}: not UTF-8 text") from None
    try:
        return _build(path, props)
    except ConfigError as e:
        raise CommandConfigError(f"{where}: {e.message}") from None


def _build(path: str, props: dict[str, str]) -> CommandConfig:
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError("security.protocol", f"expected one of {', '.join(SECURITY_PROTOCOLS)}",
                          protocol)
    rdkafka: dict[str, str] = {"security.protocol": protocol.lower()}
    sasl = _sasl(props) if protocol.startswith("SASL_") else None
    if sasl is not None:
        rdkafka.update({"sasl.mechanisms": sasl.mechanism, "sasl.username": sasl.username,
                        "sasl.password": sasl.password})
    ssl_context = None
    if protocol in tls.TLS_SECURITY_PROTOCOLS:
        settings = _ssl_settings(props)
        ssl_context = tls.client_context(settings)  # checks every file and password
        rdkafka.update(_librdkafka_ssl(settings))
    passthrough = {k: v for k, v in props.items()
                   if k not in _HANDLED and k not in JAVA_ONLY_KEYS}
    _check_librdkafka_keys(passthrough)
    rdkafka.update(passthrough)
    return CommandConfig(path, protocol, MappingProxyType(rdkafka), ssl_context, sasl)


def _sasl(props: dict[str, str]) -> SaslClientConfig:
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


def _ssl_settings(props: dict[str, str]) -> tls.SslSettings:
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
        head = Path(location).read_bytes()[:MAX_FILE_BYTES]
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


def _check_librdkafka_keys(passthrough: dict[str, str]) -> None:
    """Refuse, naming it, a key librdkafka does not know (it would refuse it later, with a
    traceback, when the client is made)."""
    if not passthrough:
        return
    from confluent_kafka import KafkaException, Producer  # only when there is such a key

    for key, value in passthrough.items():
        try:
            Producer({key: value, "log_level": 0})
        except KafkaException as e:
            raise ConfigError(key, f"not a Kafka client key odradek knows, nor a librdkafka "
                              f"setting ({e.args[0].str()})") from None


def command_config_argument(path: str) -> CommandConfig:
    """argparse's `type=` for --command-config: a bad file is a usage error (exit 2)."""
    try:
        return load(path)
    except CommandConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


HELP = ("a Kafka client properties file: security.protocol, sasl.mechanism, "
        "sasl.jaas.config (PlainLoginModule/ScramLoginModule username and password), "
        "ssl.truststore.*, ssl.keystore.*, ssl.key.password, "
        "ssl.endpoint.identification.algorithm")


def add_argument(parser: argparse.ArgumentParser | Any) -> None:
    """`--command-config FILE` on a command's parser."""
    parser.add_argument("--command-config", metavar="FILE", type=command_config_argument,
                        help=HELP)


def librdkafka_settings(config: CommandConfig | None) -> dict[str, str]:
    """The librdkafka settings of `--command-config` (none without one)."""
    return {} if config is None else dict(config.librdkafka)
