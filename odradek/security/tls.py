"""TLS for listeners and for the broker's own clients, configured with Kafka's `ssl.*` keys.

Theory of operation. A listener whose security protocol (`listener.security.protocol.map`)
is SSL or SASL_SSL serves TLS; SASL, when it comes, runs inside that TLS session, so both
protocols get the same server context here. `ListenerTls(config)` builds, at start-up,
one server `ssl.SSLContext` per TLS listener and, on demand, one client context per
listener the broker dials (the inter-broker listener for replication and transaction
markers, the first of `controller.listener.names` for the controller quorum and broker
lifecycle). A listener's settings are the `ssl.*` keys with its
`listener.name.<listener>.ssl.*` overrides on top, as Kafka resolves them.

Key and trust stores (PEM, PKCS12; JKS refused with the command that converts it) are
loaded by security/keystores.py.

Principals (RFC 2253 distinguished names, `ssl.principal.mapping.rules`) are in
security/ssl_principal.py.

Every configuration problem is a ConfigError naming the key at fault (with its
`listener.name.<listener>.` prefix when the value came from an override).
"""

from __future__ import annotations

import contextlib
import logging
import re
import ssl
from typing import Any

from ..broker_config_defs import BROKER_CONFIGS, LISTENER_OVERRIDE_PREFIX
from ..configdef import ConfigError
from .keystores import SslSettings, load_keystore, load_truststore
from .ssl_principal import NoMatchingRule, PrincipalMapper, distinguished_name

# NoMatchingRule, PrincipalMapper, distinguished_name and SslSettings are re-exported:
# callers import them from here.
__all__ = [
    "TLS_HANDSHAKE_TIMEOUT_S",
    "TLS_SECURITY_PROTOCOLS",
    "ListenerTls",
    "NoMatchingRule",
    "PrincipalMapper",
    "SslSettings",
    "TlsSession",
    "TlsTransport",
    "client_context",
    "distinguished_name",
    "handshake_failure",
    "listener_settings",
    "openssl_cipher_name",
    "server_context",
]

log = logging.getLogger(__name__)

TLS_SECURITY_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
# A peer that has not finished its TLS handshake by then is dropped (Kafka bounds it by
# connections.max.idle.ms; a handshake needs no more than a few round trips).
TLS_HANDSHAKE_TIMEOUT_S = 10.0

# The ssl.* keys a listener may override with listener.name.<listener>.<key>.
SSL_KEYS = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.cipher.suites",
    "ssl.endpoint.identification.algorithm", "ssl.principal.mapping.rules",
)

_TLS_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


# ----------------------------------------------------------------------------------------
# Settings of one listener


def listener_settings(config: Any, listener: str) -> SslSettings:
    """`ssl.*` of `config` with `listener.name.<listener>.ssl.*` on top (parsed and
    validated as the top-level key would be)."""
    overrides = config.listener_overrides(listener)
    values: dict[str, Any] = {}
    overridden: set[str] = set()
    for key in SSL_KEYS:
        if key in overrides:
            name = f"{LISTENER_OVERRIDE_PREFIX}{listener.lower()}.{key}"
            try:
                values[key] = BROKER_CONFIGS[key].parse(overrides[key])
            except ConfigError as e:
                raise ConfigError(name, e.reason, e.value) from None
            overridden.add(key)
        else:
            values[key] = config.get(key)
    return SslSettings(listener.upper(), values, frozenset(overridden))


# ----------------------------------------------------------------------------------------
# Contexts


def server_context(s: SslSettings) -> ssl.SSLContext:
    """The context a TLS listener serves with. A listener needs a key store."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(ctx, s)
    _set_ciphers(ctx, s)
    if not load_keystore(ctx, s):
        raise ConfigError(s.key_name("ssl.keystore.location"),
                          f"listener {s.listener} speaks TLS but has no key store: set "
                          "ssl.keystore.location (PEM or PKCS12) or ssl.keystore.key and "
                          "ssl.keystore.certificate.chain")
    auth = str(s.get("ssl.client.auth")).lower()
    ctx.verify_mode = _CLIENT_AUTH[auth]
    if auth != "none":
        load_truststore(ctx, s, server_side=True)
    return ctx


def client_context(s: SslSettings) -> ssl.SSLContext:
    """The context the broker dials a TLS listener with: it always verifies the server's
    chain against the trust store; `ssl.endpoint.identification.algorithm=https` (the
    default) also checks the host name, empty does not. The key store, if any, is the
    client certificate (mutual TLS)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols(ctx, s)
    _set_ciphers(ctx, s)
    algorithm = (s.get("ssl.endpoint.identification.algorithm") or "").strip()
    if algorithm.lower() not in ("", "https"):
        raise ConfigError(s.key_name("ssl.endpoint.identification.algorithm"),
                          "expected 'https' or empty", algorithm)
    ctx.check_hostname = algorithm != ""
    ctx.verify_mode = ssl.CERT_REQUIRED
    load_truststore(ctx, s, server_side=False)
    load_keystore(ctx, s)
    return ctx


def _set_protocols(ctx: ssl.SSLContext, s: SslSettings) -> None:
    names = [p.strip() for p in s.get("ssl.enabled.protocols") if p.strip()]
    key = s.key_name("ssl.enabled.protocols")
    unknown = [n for n in names if n not in _TLS_VERSIONS]
    if unknown or not names:
        raise ConfigError(key, f"expected some of {', '.join(_TLS_VERSIONS)}", ",".join(names))
    versions = sorted(_TLS_VERSIONS[n] for n in names)
    try:
        ctx.minimum_version = versions[0]
        ctx.maximum_version = versions[-1]
    except ValueError as e:
        raise ConfigError(key, f"not supported by this OpenSSL: {e}", ",".join(names)) from None


def openssl_cipher_name(name: str) -> str:
    """A cipher suite's OpenSSL name from its IANA/JSSE name (what Kafka configs use):
    TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 -> ECDHE-RSA-AES128-GCM-SHA256. TLS 1.3 suites
    and names already in OpenSSL's form are returned unchanged."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kx, _, cipher = name[4:].partition("_WITH_")
    kx = "" if kx == "RSA" else kx.replace("_", "-") + "-"
    m = re.fullmatch(r"(AES|CAMELLIA|ARIA)_(128|256)_(GCM|CCM|CBC)_(SHA|SHA256|SHA384)", cipher)
    if m:
        alg, bits, mode, mac = m.groups()
        body = {"GCM": f"{alg}{bits}-GCM-{mac}", "CCM": f"{alg}{bits}-CCM",
                "CBC": f"{alg}{bits}-{mac}"}[mode]
        return kx + body
    if cipher == "CHACHA20_POLY1305_SHA256":
        return kx + "CHACHA20-POLY1305"
    return kx + cipher.replace("_", "-")


def _set_ciphers(ctx: ssl.SSLContext, s: SslSettings) -> None:
    names = [c.strip() for c in s.get("ssl.cipher.suites") if c.strip()]
    if not names:
        return
    key = s.key_name("ssl.cipher.suites")
    known = {c["name"] for c in ssl.create_default_context().get_ciphers()}
    wanted = [openssl_cipher_name(n) for n in names]
    unknown = [n for n, w in zip(names, wanted, strict=True) if w not in known]
    if unknown:
        raise ConfigError(key, f"unknown or disabled cipher suites: {', '.join(unknown)}",
                          ",".join(names))
    tls12 = [w for w in wanted if not w.startswith("TLS_")]
    if tls12:
        ctx.set_ciphers(":".join(tls12))
    if len(tls12) != len(wanted):
        # Python's ssl module cannot restrict TLS 1.3 suites; all of OpenSSL's (AES-GCM,
        # ChaCha20-Poly1305) stay enabled whenever TLSv1.3 is.
        log.info("%s: TLS 1.3 cipher suites cannot be restricted; OpenSSL's defaults apply",
                 key)
    elif ctx.maximum_version >= ssl.TLSVersion.TLSv1_3 and \
            ctx.minimum_version <= ssl.TLSVersion.TLSv1_3:
        log.info("%s lists TLS 1.2 suites only; TLS 1.3 connections use OpenSSL's defaults",
                 key)


# ----------------------------------------------------------------------------------------
# The broker's view


class ListenerTls:
    """Server contexts for every TLS listener (built, hence checked, at start-up), client
    contexts for listeners the broker dials, principal mappers by listener."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self._protocols: dict[str, str] = dict(config.listener_security_protocol_map)
        self._server: dict[str, ssl.SSLContext] = {}
        self._mappers: dict[str, PrincipalMapper] = {}
        self._client: dict[str, ssl.SSLContext | None] = {}
        for endpoint in config.listeners:
            name = endpoint.name.upper()
            if self.is_tls(name):
                s = listener_settings(config, name)
                self._server[name] = server_context(s)
                self._mappers[name] = PrincipalMapper.from_rules(
                    s.get("ssl.principal.mapping.rules"),
                    s.key_name("ssl.principal.mapping.rules"))
        # What this node dials must be checked at start-up too, not at the first call.
        for name in self._dialled_listeners(config):
            self.client_context(name)

    @staticmethod
    def _dialled_listeners(config: Any) -> list[str]:
        names = [config.inter_broker_listener_name]
        controllers = sorted(config.controller_listener_names)
        if controllers:
            names.append(_first_controller_listener(config))
        return [n for n in names if n]

    def is_tls(self, listener: str) -> bool:
        return self._protocols.get(listener.upper()) in TLS_SECURITY_PROTOCOLS

    def server_context(self, listener: str) -> ssl.SSLContext | None:
        """The context a listener serves with; None for a plaintext listener."""
        return self._server.get(listener.upper())

    def client_context(self, listener: str) -> ssl.SSLContext | None:
        """The context to dial `listener` of another node with; None if it is plaintext."""
        name = listener.upper()
        if name not in self._client:
            self._client[name] = (client_context(listener_settings(self.config, name))
                                  if self.is_tls(name) else None)
        return self._client[name]

    def controller_client_context(self) -> ssl.SSLContext | None:
        name = _first_controller_listener(self.config)
        return self.client_context(name) if name else None

    def principal_name(self, listener: str, der_certificate: bytes) -> str:
        """The principal name of a peer certificate on `listener` (NoMatchingRule if the
        rules map it to nothing)."""
        return self._mappers[listener.upper()].name(distinguished_name(der_certificate))


def _first_controller_listener(config: Any) -> str | None:
    """Kafka dials the controllers on the first of controller.listener.names (as written)."""
    text = config.get("controller.listener.names") or ""
    names = [n.strip().upper() for n in str(text).split(",") if n.strip()]
    return names[0] if names else None


# ----------------------------------------------------------------------------------------
# One server-side TLS connection, sans I/O


# Decrypted bytes are taken from OpenSSL this much at a time: one read gives at most one
# TLS record's content, 16 KiB, so a larger size only allocates more per read.
TLS_READ_CHUNK_BYTES = 16 * 1024


class TlsHandshakeTimeout(Exception):
    """The peer did not complete its TLS handshake within TLS_HANDSHAKE_TIMEOUT_S."""


class TlsSession:
    """The server side of one TLS connection as a state machine over memory buffers: the
    network code feeds it what the socket received and writes what it returns; it never
    touches a socket or a clock (so a handshake's every failure is a few-line unit test).

    `receive(data)` returns the application bytes decrypted so far (b"" while the
    handshake runs) and raises ssl.SSLError when the peer's bytes are not TLS, its
    certificate is refused, or a record does not decrypt. `send(data)` returns the
    records to write. After either, `outgoing()` holds anything else OpenSSL wants sent
    (handshake messages, TLS 1.3 session tickets, alerts)."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        # OpenSSL hands out one TLS record per read, and librdkafka sends many small
        # records (a quarter of 1 KiB values came as a record of their own, each after
        # a ~10-byte one; docs/configuration.md): the reads below call the C object
        # under ssl.SSLObject (CPython's _sslobj, same read()) to skip one Python call
        # per TLS record.
        self._read = getattr(self._ssl, "_sslobj", self._ssl).read
        self.handshake_done = False
        self.peer_closed = False  # the peer sent close_notify

    def receive(self, data: bytes) -> bytes:
        self._incoming.write(data)
        if not self.handshake_done:
            try:
                self._ssl.do_handshake()
            except ssl.SSLWantReadError:
                return b""
            self.handshake_done = True
        chunks: list[bytes] = []
        append, read = chunks.append, self._read
        try:
            while chunk := read(TLS_READ_CHUNK_BYTES):
                append(chunk)
            self.peer_closed = True  # CPython's read answers close_notify with b""
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:
            self.peer_closed = True
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def send(self, data: bytes | bytearray | memoryview) -> bytes:
        assert self.handshake_done, "application data before the handshake completed"
        self._ssl.write(data)
        return self._outgoing.read()

    def send_all(self, chunks: Any) -> bytes:
        """`send` of several buffers, as one write's worth of records."""
        assert self.handshake_done, "application data before the handshake completed"
        for chunk in chunks:
            self._ssl.write(chunk)
        return self._outgoing.read()

    def outgoing(self) -> bytes:
        return self._outgoing.read()

    def close(self) -> bytes:
        """A close_notify alert to send (b"" if OpenSSL has none to give)."""
        try:
            self._ssl.unwrap()
        except ssl.SSLError:
            pass
        return self._outgoing.read()

    def peer_certificate(self) -> bytes | None:
        """The peer's certificate (DER) once the handshake is done, if it sent one."""
        return self._ssl.getpeercert(binary_form=True) if self.handshake_done else None

    def description(self) -> str:
        cipher = self._ssl.cipher()
        return f"{self._ssl.version()} {cipher[0] if cipher else '?'}"


class TlsTransport:
    """What a connection writes to once its TLS handshake is done: an asyncio transport
    look-alike that encrypts through a TlsSession into the TCP transport under it (the
    connection's code is the same for PLAINTEXT and TLS)."""

    def __init__(self, raw: Any, session: TlsSession) -> None:
        self.raw = raw
        self.session = session

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.raw.write(self.session.send(data))

    def writelines(self, chunks: Any) -> None:
        self.raw.write(self.session.send_all(chunks))

    def close(self) -> None:
        if not self.raw.is_closing():
            with contextlib.suppress(Exception):
                self.raw.write(self.session.close())
            self.raw.close()

    def abort(self) -> None:
        """Close at once, dropping what is unsent (a peer that reads nothing)."""
        self.raw.abort()

    def is_closing(self) -> bool:
        return bool(self.raw.is_closing())

    def pause_reading(self) -> None:
        self.raw.pause_reading()

    def resume_reading(self) -> None:
        self.raw.resume_reading()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.raw.get_extra_info(name, default)


def handshake_failure(e: BaseException) -> str:
    """Why a TLS handshake failed, in words an operator can act on."""
    if isinstance(e, TlsHandshakeTimeout):
        return f"no TLS handshake within {TLS_HANDSHAKE_TIMEOUT_S:.0f} s"
    if isinstance(e, ssl.SSLError):
        hint = {
            "WRONG_VERSION_NUMBER": " (not TLS: a PLAINTEXT client on a TLS listener?)",
            "HTTP_REQUEST": " (an HTTP request, not TLS)",
            "PEER_DID_NOT_RETURN_A_CERTIFICATE": " (ssl.client.auth=required and the "
                                                  "client sent no certificate)",
            "CERTIFICATE_VERIFY_FAILED": " (the client certificate is not signed by the "
                                         "trust store)",
        }.get(e.reason or "", "")
        return f"{e.reason or type(e).__name__}{hint}: {e}"
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
