"""SASL on a connection, as Kafka's SaslServerAuthenticator does it (KIP-43, KIP-152, KIP-368).

Theory of operation. Each connection on a SASL_PLAINTEXT or SASL_SSL listener
owns one `SaslSession`, a state machine that never touches a socket; the
SaslHandshake and SaslAuthenticate handlers reach it as `ctx.sasl` (the
connection itself stays out of their sight). States and transitions:

    HANDSHAKE --SaslHandshake(enabled mechanism)--> AUTHENTICATE
    AUTHENTICATE --SaslAuthenticate(token) ...--> AUTHENTICATED   (mechanism done)
    AUTHENTICATED --SaslHandshake (client used SaslAuthenticate v1+)--> REAUTH_AUTHENTICATE
    REAUTH_AUTHENTICATE --SaslAuthenticate ...--> AUTHENTICATED   (same principal only)
    any error --> FAILED: the answer is sent, then the connection is closed

A SaslHandshake v0 client sends the mechanism's tokens as bare size-prefixed
frames instead of SaslAuthenticate requests (Kafka's pre-KIP-152 framing):
`raw_tokens` says so and the pipeline hands such frames to `raw_token`.

Errors are Kafka's: UNSUPPORTED_SASL_MECHANISM (33) with the enabled list,
ILLEGAL_SASL_STATE (34) for a request out of order, SASL_AUTHENTICATION_FAILED
(58) with a message. The log line of a failure names the listener, the peer,
the mechanism and the user the client claimed, never a password or a proof.

Re-authentication (KIP-368): with `connections.max.reauth.ms` > 0 a session
lives that long (SaslAuthenticate v1+ tells the client `session_lifetime_ms`);
past it, `expired(now_ms)` is true and the pipeline closes the connection on
any request but SaslHandshake/SaslAuthenticate, which start a new exchange.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from .oauthbearer import (
    KVSEP,
    OAuthBearerError,
    ValidatorOptions,
    client_response,
    error_challenge,
    parse_client_response,
    unsecured_token,
    validate_unsecured,
)
from .resources import Principal
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .scram import ScramClient, ScramCredential, ScramError, ScramServer

log = logging.getLogger(__name__)

NONE = 0
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58

SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, "OAUTHBEARER")
MAX_PLAIN_TOKEN_BYTES = 4096  # authzid NUL user NUL password: more than this is refused

CredentialLookup = Callable[[str, str], ScramCredential | None]


@dataclass(frozen=True)
class SaslServerConfig:
    """What a listener's sessions need: built once per SASL listener at start-up."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    scram_credentials: CredentialLookup = lambda user, mechanism: None
    reauth_ms: int = 0  # connections.max.reauth.ms; 0: sessions do not expire
    oauth: ValidatorOptions = field(default_factory=ValidatorOptions)  # OAUTHBEARER

    def __repr__(self) -> str:  # plain_users holds passwords
        return (f"SaslServerConfig({self.listener}, {self.mechanisms}, "
                f"{len(self.plain_users)} PLAIN users, reauth_ms={self.reauth_ms})")


@dataclass(frozen=True)
class SaslClientConfig:
    """How one of this node's own clients logs in (protocol/client.py KafkaChannel)."""

    mechanism: str
    username: str  # OAUTHBEARER: the unsecured token's principal (unsecuredLoginStringClaim_sub)
    password: str
    token_lifetime_s: int = 3600  # OAUTHBEARER: unsecuredLoginLifetimeSeconds

    def __repr__(self) -> str:  # never the password
        return f"SaslClientConfig({self.mechanism}, {self.username})"

    def exchange(self) -> Generator[bytes, bytes, None]:
        """The client's side (protocol/client.SaslLogin): yields tokens, is sent
        the server's answers; a SCRAM server signature that does not verify
        raises ScramError (a ValueError)."""
        if self.mechanism == "PLAIN":
            yield b"\x00" + self.username.encode() + b"\x00" + self.password.encode()
            return
        if self.mechanism == "OAUTHBEARER":
            import time

            token = unsecured_token(self.username, int(time.time() * 1000),
                                    self.token_lifetime_s)
            answer = yield client_response(token)
            if answer:  # an error challenge: acknowledge, the server then fails it
                yield KVSEP
            return
        client = ScramClient(self.mechanism, self.username, self.password)
        server_first = yield client.first()
        server_final = yield client.final(server_first)
        client.verify(server_final)


class State(Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


@dataclass(slots=True)
class HandshakeResult:
    error_code: int
    mechanisms: list[str]


@dataclass(slots=True)
class AuthenticateResult:
    error_code: int
    error_message: str | None = None
    auth_bytes: bytes = b""
    session_lifetime_ms: int = 0


class _Failure(Exception):
    """Authentication failed: `message` goes to the client, `user` to the log."""

    def __init__(self, message: str, user: str | None) -> None:
        super().__init__(message)
        self.user = user


class _Plain:
    """RFC 4616: one token `authzid NUL authcid NUL passwd`, no answer."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self.done = False

    def step(self, token: bytes) -> bytes:
        if len(token) > MAX_PLAIN_TOKEN_BYTES:
            raise _Failure("Authentication failed: PLAIN token too long", None)
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise _Failure("Invalid SASL/PLAIN response: expected 3 tokens", None)
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise _Failure("Invalid SASL/PLAIN response: not UTF-8", None) from None
        if not user:
            raise _Failure("Authentication failed: username not specified", None)
        if not password:
            raise _Failure("Authentication failed: password not specified", user)
        if authzid and authzid != user:
            raise _Failure("Authentication failed: Client requested an authorization id "
                           "that is different from username", user)
        expected = self._users.get(user)
        # compare even for an unknown user, so the time taken does not tell who exists
        ok = hmac.compare_digest(password.encode(), (expected or "\x00" + password).encode())
        if expected is None or not ok:
            raise _Failure("Authentication failed: Invalid username or password", user)
        self.username = user
        self.done = True
        return b""


class _Scram:
    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        self._server = ScramServer(mechanism, lookup)
        self._first_done = False
        self.username: str | None = None
        self.done = False

    def step(self, token: bytes) -> bytes:
        try:
            if not self._first_done:
                self._first_done = True
                answer = self._server.first(token)
                self.username = self._server.username
                return answer
            answer = self._server.final(token)
        except ScramError as e:
            raise _Failure(str(e), self._server.username) from None
        self.done = True
        return answer


class _OAuthBearer:
    """RFC 7628 with Kafka's unsecured JWS validation (oauthbearer.py). A refused
    token gets the error challenge first; the client's lone kvsep then fails."""

    def __init__(self, options: ValidatorOptions) -> None:
        self._options = options
        self.now_ms = 0  # set by the session before each step
        self.username: str | None = None
        self.expires_at_ms: int | None = None
        self.done = False
        self._refused: str | None = None

    def step(self, token: bytes) -> bytes:
        if self._refused is not None:
            if token != KVSEP:
                raise _Failure("Invalid OAUTHBEARER client message after an error "
                               "challenge: expected a lone 0x01", None)
            raise _Failure(self._refused, None)
        try:
            response = parse_client_response(token)
            valid = validate_unsecured(response.token, self._options, self.now_ms,
                                       response.authzid)
        except OAuthBearerError as e:
            self._refused = f"Authentication failed: {e}"
            log.info("OAUTHBEARER token refused: %s", e)
            return error_challenge(self._options)
        self.username = valid.principal
        self.expires_at_ms = valid.expires_at_ms
        self.done = True
        return b""


class SaslSession:
    """The SASL state of one connection (see the module's theory of operation)."""

    def __init__(self, config: SaslServerConfig, peer: str,
                 on_authenticated: Callable[[Principal], None]) -> None:
        self.config = config
        self.peer = peer
        self._on_authenticated = on_authenticated
        self.state = State.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: Principal | None = None
        self._exchange: _Plain | _Scram | _OAuthBearer | None = None
        self.raw_tokens = False  # SaslHandshake v0: tokens come as bare frames
        self.supports_reauth = False  # the client used SaslAuthenticate v1+
        self.expires_at_ms: int | None = None
        self.close_after_response = False  # an error answer: send it, then close

    # -- what the pipeline asks ---------------------------------------------------------

    @property
    def authenticated(self) -> bool:
        return self.principal is not None and self.state is not State.FAILED

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_ms is not None and now_ms >= self.expires_at_ms

    # -- SaslHandshake ----------------------------------------------------------------

    def handshake(self, mechanism: str, version: int) -> HandshakeResult:
        enabled = list(self.config.mechanisms)
        reauth = self.state is State.AUTHENTICATED and self.supports_reauth
        if self.state is not State.HANDSHAKE and not reauth:
            return self._refuse_handshake(ILLEGAL_SASL_STATE, enabled,
                                          "SaslHandshake in state " + self.state.value)
        if mechanism not in enabled or (reauth and mechanism != self.mechanism):
            log.warning("SASL handshake from %s on listener %s: mechanism %r is not "
                        "enabled (enabled: %s)", self.peer, self.config.listener,
                        mechanism[:64], ", ".join(enabled))
            self.state = State.FAILED
            self.close_after_response = True
            return HandshakeResult(UNSUPPORTED_SASL_MECHANISM, enabled)
        self.mechanism = mechanism
        self._exchange = (_Plain(self.config.plain_users) if mechanism == "PLAIN"
                          else _OAuthBearer(self.config.oauth) if mechanism == "OAUTHBEARER"
                          else _Scram(mechanism, self.config.scram_credentials))
        self.raw_tokens = version == 0 and not reauth
        self.state = State.AUTHENTICATE
        return HandshakeResult(NONE, enabled)

    def _refuse_handshake(self, code: int, enabled: list[str], why: str) -> HandshakeResult:
        log.warning("closing SASL connection from %s on listener %s: %s", self.peer,
                    self.config.listener, why)
        self.state = State.FAILED
        self.close_after_response = True
        return HandshakeResult(code, enabled)

    # -- SaslAuthenticate --------------------------------------------------------------

    def authenticate(self, token: bytes, version: int, now_ms: int) -> AuthenticateResult:
        if self.state is not State.AUTHENTICATE or self.raw_tokens:
            why = ("SaslAuthenticate after a SaslHandshake v0 (raw tokens expected)"
                   if self.raw_tokens else f"SaslAuthenticate in state {self.state.value}")
            log.warning("closing SASL connection from %s on listener %s: %s", self.peer,
                        self.config.listener, why)
            self.state = State.FAILED
            self.close_after_response = True
            return AuthenticateResult(ILLEGAL_SASL_STATE, f"Unexpected {why}")
        if version >= 1:
            self.supports_reauth = True
        try:
            answer = self._step(token, now_ms)
            lifetime = self._complete(now_ms) if self._done else 0
        except _Failure as e:
            return AuthenticateResult(SASL_AUTHENTICATION_FAILED, str(e))
        return AuthenticateResult(NONE, None, answer, lifetime if version >= 1 else 0)

    def raw_token(self, token: bytes, now_ms: int) -> bytes | None:
        """A SaslHandshake v0 client's bare token: the answer token, or None
        (failed: Kafka closes the connection without an answer)."""
        if not self.raw_tokens or self.state is not State.AUTHENTICATE:
            return None  # failed before: frames the client pipelined meanwhile
        try:
            answer = self._step(token, now_ms)
            if self._done:
                self._complete(now_ms)
                self.raw_tokens = False
        except _Failure:
            return None
        return answer

    @property
    def _done(self) -> bool:
        return self._exchange is not None and self._exchange.done

    def _step(self, token: bytes, now_ms: int) -> bytes:
        exchange = self._exchange
        assert exchange is not None
        if isinstance(exchange, _OAuthBearer):
            exchange.now_ms = now_ms
        try:
            return exchange.step(token)
        except _Failure as e:
            log.warning("SASL authentication failed: listener %s, peer %s, mechanism %s, "
                        "user %r: %s", self.config.listener, self.peer, self.mechanism,
                        e.user if e.user is None else e.user[:128], e)
            self.state = State.FAILED
            self.close_after_response = True
            raise

    def _complete(self, now_ms: int) -> int:
        exchange = self._exchange
        assert exchange is not None and exchange.username is not None
        principal = Principal("User", exchange.username)
        if self.principal is not None and principal != self.principal:
            log.warning("SASL re-authentication from %s on listener %s as %s refused: the "
                        "connection is %s", self.peer, self.config.listener, principal,
                        self.principal)
            self.state = State.FAILED
            self.close_after_response = True
            raise _Failure("Cannot change principals during re-authentication from "
                           f"{self.principal} to {principal}", exchange.username)
        first = self.principal is None
        self.principal = principal
        self.state = State.AUTHENTICATED
        self._exchange = None
        reauth_ms = self.config.reauth_ms
        credential_end = getattr(exchange, "expires_at_ms", None)
        if reauth_ms > 0 and credential_end is not None:
            # KIP-368: a session ends with its credential (an OAUTHBEARER token's exp)
            reauth_ms = max(1, min(reauth_ms, credential_end - now_ms))
        self.expires_at_ms = now_ms + reauth_ms if reauth_ms > 0 else None
        if first:
            log.info("SASL %s: %s authenticated from %s on listener %s", self.mechanism,
                     principal, self.peer, self.config.listener)
            self._on_authenticated(principal)
        else:
            log.debug("SASL %s: %s re-authenticated from %s", self.mechanism, principal,
                      self.peer)
        return reauth_ms
