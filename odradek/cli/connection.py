"""The blocking Kafka client of the CLI commands that speak the protocol themselves
(transactions, partitions, quotas, acls): one socket, one request at a time, requests
built from dicts with kio's classes.

With a `--command-config` (cli/client_config.py) that asks for them, the socket is TLS
and the connection logs in with SaslHandshake v1 and SaslAuthenticate v2 (PLAIN, or
SCRAM-SHA-256/512 with security/scram.py's client) before any other request, as
Kafka's clients do. `check_login` does just that for the commands on confluent-kafka,
so a refused login is one clear line at once rather than librdkafka's retries until
the timeout.
"""

from __future__ import annotations

import argparse
import io
import socket
import struct
import sys
from collections.abc import Callable
from typing import Any

from kio.serial import entity_writer

from odradek.protocol import api, entities
from odradek.protocol.guard import decode_message
from odradek.security.sasl import SaslClientConfig

from . import client_config, options, output
from .client_config import CommandConfig

MAX_RESPONSE_BYTES = 64 * 1024 * 1024


class AuthenticationError(OSError):
    """The broker refused the SASL login (or its answer did not verify)."""


class Connection:
    """One blocking connection, one request at a time; each API in the version
    `versions` names (other CLI commands pass their own table). With a
    `--command-config` that asks for them, the socket is TLS (the server's name
    is the host of `address`) and the connection logs in with SaslHandshake v1
    and SaslAuthenticate v2 before anything else, as Kafka's clients do."""

    def __init__(self, address: str, timeout_s: float, versions: dict[int, int],
                 client_id: bytes = b"odradek-cli",
                 config: CommandConfig | None = None) -> None:
        host, _, port = address.rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        self.address = address
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.correlation_id = 0
        self.versions = versions
        self.client_id = client_id
        try:
            if config is not None and config.ssl_context is not None:
                self.sock = config.ssl_context.wrap_socket(self.sock, server_hostname=host)
            if config is not None and config.sasl is not None:
                self._authenticate(config.sasl)
        except BaseException:
            self.sock.close()
            raise

    def _authenticate(self, sasl: SaslClientConfig) -> None:
        hs = self._decoded(api.ApiKey.SASL_HANDSHAKE, 1, {"mechanism": sasl.mechanism})
        if int(hs.error_code):
            raise AuthenticationError(
                f"{self.address} refused SASL mechanism {sasl.mechanism} "
                f"({hs.error_code.name}); it offers {', '.join(hs.mechanisms) or 'none'}")
        exchange = sasl.exchange()
        token: bytes | None = next(exchange)
        while token is not None:
            resp = self._decoded(api.ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
            if int(resp.error_code):
                raise AuthenticationError(
                    f"SASL {sasl.mechanism} authentication to {self.address} as "
                    f"{sasl.username} failed: {resp.error_message or resp.error_code.name}")
            try:
                token = exchange.send(bytes(resp.auth_bytes))
            except StopIteration:
                token = None
            except ValueError as e:  # the server's signature does not verify
                raise AuthenticationError(f"SASL {sasl.mechanism} with {self.address}: {e}"
                                          ) from None

    def _decoded(self, key: int, version: int, data: dict[str, Any]) -> Any:
        frame, pos = self._exchange(key, version, data)
        return decode_message(api.response_class(key, version), frame, pos)

    def call(self, key: int, data: dict[str, Any]) -> Any:
        frame, pos = self.call_raw(key, data)
        resp = decode_message(api.response_class(key, self.versions[key]), frame, pos)
        return resp

    def call_raw(self, key: int, data: dict[str, Any]) -> tuple[bytes, int]:
        """The response frame and where its body starts."""
        return self._exchange(key, self.versions[key], data)

    def _exchange(self, key: int, version: int, data: dict[str, Any]) -> tuple[bytes, int]:
        req_cls = api.request_class(key, version)
        body = io.BytesIO()
        entity_writer(req_cls)(body, entities.build(req_cls, data))
        self.correlation_id += 1
        client_id = self.client_id
        header = struct.pack(">hhih", key, version, self.correlation_id, len(client_id)) + client_id
        if api.request_header_version(key, version) >= 2:
            header += b"\x00"
        payload = header + body.getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._read(4))
        if size < 4 or size > MAX_RESPONSE_BYTES:
            raise OSError(f"bad response size {size}")
        frame = self._read(size)
        return frame, 4 + (1 if api.response_header_version(key, version) >= 1 else 0)

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise OSError("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


def check_login(bootstrap_servers: str, config: CommandConfig | None, timeout_s: float) -> None:
    """Log in, as `config` says, to the first bootstrap server that answers; raises an
    OSError saying why not (AuthenticationError: the broker's message, at once).
    Nothing to check without SASL or TLS."""
    if config is None or (config.sasl is None and config.ssl_context is None):
        return
    failure = OSError(f"no bootstrap server in {bootstrap_servers!r}")
    for address in filter(None, (a.strip() for a in bootstrap_servers.split(","))):
        try:
            Connection(address, timeout_s, {}, config=config).close()
            return
        except AuthenticationError:
            raise
        except OSError as e:  # refused, timed out, TLS handshake (ssl.SSLError)
            failure = OSError(f"cannot connect to {address}: {e}")
    raise failure


def with_login_check(command: str, handler: Callable[[argparse.Namespace], int]
                     ) -> Callable[[argparse.Namespace], int]:
    """`handler` of a command on confluent-kafka, after `check_login`: a refused login
    or TLS handshake is `odradek <command>: <why>` and exit code 1 at once."""
    def run(args: argparse.Namespace) -> int:
        try:
            check_login(args.bootstrap_server, args.command_config, args.timeout)
        except OSError as e:
            print(f"odradek {command}: {e}", file=sys.stderr)
            return 1
        return handler(args)
    return run


def reporting_broker_errors(command: str, handler: Callable[[argparse.Namespace], int]
                            ) -> Callable[[argparse.Namespace], int]:
    """`handler`, with a broker that cannot be reached or refuses the login reported
    as `odradek <command>: <why>` and exit code 1 (not a traceback)."""
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except OSError as e:  # ssl.SSLError and AuthenticationError are OSErrors
            print(f"odradek {command}: {e}", file=sys.stderr)
            return 1
    return run


def add_command(subparsers: Any, name: str, help_text: str,
                doc: str | None) -> tuple[argparse.ArgumentParser, Any]:
    """A command of this module's clients: its parser (--bootstrap-server,
    --format, --command-config, --timeout) and its actions' subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_bootstrap_argument(parser)
    output.add_format_argument(parser)
    client_config.add_argument(parser)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    return parser, parser.add_subparsers(dest="action", required=True)
