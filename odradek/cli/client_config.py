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

Keys: Kafka's client keys, verbatim, mapped by security/client_properties.py (its
docstring has the table; Spark's `kafka.*` options go through the same mapping). Any
other key is handed to librdkafka as it is (a key librdkafka does not know is refused
here) and ignored by the socket client; keys only the Java client has (e.g.
`ssl.keymanager.algorithm`) are ignored.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from odradek.config import parse_properties
from odradek.configdef import ConfigError
from odradek.security.client_properties import (
    HANDLED_KEYS,
    JAVA_ONLY_KEYS,
    SECURITY_PROTOCOLS,
    ClientSecurity,
    client_security,
)

__all__ = ["JAVA_ONLY_KEYS", "SECURITY_PROTOCOLS", "CommandConfig", "CommandConfigError",
           "add_argument", "command_config_argument", "librdkafka_settings", "load"]

MAX_FILE_BYTES = 1024 * 1024  # a client properties file is a few lines


class CommandConfigError(ValueError):
    """A command-config file that cannot be used; the message names file and key."""


@dataclass(frozen=True)
class CommandConfig(ClientSecurity):
    """What one `--command-config FILE` says, for both kinds of client: its security
    settings (`librdkafka` with the file's other keys too) and where it came from."""

    path: str = ""

    @property
    def security_protocol(self) -> str:
        return self.protocol

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
    security = client_security(props)
    passthrough = {k: v for k, v in props.items()
                   if k not in HANDLED_KEYS and k not in JAVA_ONLY_KEYS}
    _check_librdkafka_keys(passthrough)
    rdkafka = {**security.librdkafka, **passthrough}
    return CommandConfig(security.protocol, MappingProxyType(rdkafka), security.ssl_context,
                         security.sasl, path=path)


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
