"""SASL/OAUTHBEARER with Kafka's unsecured JWS tokens, for development (KIP-255).

The client's one message (RFC 7628 section 3.1, as Kafka's
OAuthBearerClientInitialResponse reads it) is

    gs2-header kvsep "auth=Bearer " token kvsep *(key "=" value kvsep) kvsep

with the GS2 header ``n,,`` or ``n,a=<authzid>,`` and kvsep the byte 0x01.

The token is an unsecured JWS (RFC 7515 appendix A.5): ``base64url(header) "."
base64url(claims) "."`` with an empty signature and the header's ``alg``
``none``. Kafka's default server callback handler,
OAuthBearerUnsecuredValidatorCallbackHandler, accepts it when:

- the claims hold ``exp`` (seconds since the epoch, a number) and it is not
  past, allowing ``unsecuredValidatorAllowableClockSkewMs``;
- ``iat``, when present, is a number not in the future (same skew);
- the principal claim (``unsecuredValidatorPrincipalClaimName``, default
  ``sub``) is a non-empty string: the principal is ``User:<it>``;
- every scope of ``unsecuredValidatorRequiredScope`` (space or comma
  separated) is in the scope claim (``unsecuredValidatorScopeClaimName``,
  default ``scope``: a space-separated string or a list of strings);
- an authzid, when given, equals the principal.

The options are those of the listener's
``listener.name.<l>.oauthbearer.sasl.jaas.config`` (OAuthBearerLoginModule).

A token that fails is answered as Kafka answers it: a server challenge holding
``{"status":"invalid_token"}`` (plus the scope that was required); the client
acknowledges with a lone kvsep and then gets SASL_AUTHENTICATION_FAILED with
the reason. Nothing here logs or returns the token itself.

The client side (`unsecured_token`) builds the token Kafka's
OAuthBearerUnsecuredLoginCallbackHandler builds from
``unsecuredLoginStringClaim_sub`` and ``unsecuredLoginLifetimeSeconds``.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KVSEP = b"\x01"
MAX_TOKEN_BYTES = 65536  # a client message longer than this is refused
UNSECURED_VALIDATOR = ("org.apache.kafka.common.security.oauthbearer."
                       "OAuthBearerUnsecuredValidatorCallbackHandler")
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

_GS2 = re.compile(rb"^n,(?:a=([^,\x01]*))?,$")
_KEY = re.compile(rb"^[A-Za-z]+$")


class OAuthBearerError(ValueError):
    """A refused client message or token; the message never holds the token."""


@dataclass(frozen=True, slots=True)
class ValidatorOptions:
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0

    @classmethod
    def from_jaas(cls, options: Mapping[str, str]) -> ValidatorOptions:
        """From an OAuthBearerLoginModule entry's options; ValueError names the option."""
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0")
        try:
            skew_ms = int(skew)
        except ValueError:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs: not a number") from None
        if skew_ms < 0:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs: must be at least 0")
        required = options.get("unsecuredValidatorRequiredScope", "")
        return cls(options.get("unsecuredValidatorPrincipalClaimName", "sub") or "sub",
                   options.get("unsecuredValidatorScopeClaimName", "scope") or "scope",
                   tuple(s for s in re.split(r"[\s,]+", required) if s), skew_ms)


@dataclass(frozen=True, slots=True)
class ClientResponse:
    authzid: str
    token: str
    extensions: dict[str, str]


@dataclass(frozen=True, slots=True)
class ValidToken:
    principal: str
    expires_at_ms: int


def parse_client_response(message: bytes) -> ClientResponse:
    """The client's initial response (module docstring). Raises OAuthBearerError."""
    if len(message) > MAX_TOKEN_BYTES:
        raise OAuthBearerError("Invalid OAUTHBEARER client first message: too long")
    parts = message.split(KVSEP)
    # gs2-header, then key=value pairs, then the two empty strings of the final kvsep
    if len(parts) < 4 or parts[-1] != b"" or parts[-2] != b"":
        raise OAuthBearerError("Invalid OAUTHBEARER client first message")
    gs2 = _GS2.match(parts[0])
    if gs2 is None:
        raise OAuthBearerError("Invalid OAUTHBEARER client first message: bad GS2 header")
    token: str | None = None
    extensions: dict[str, str] = {}
    for kv in parts[1:-2]:
        key, sep, value = kv.partition(b"=")
        if not sep or not _KEY.match(key):
            raise OAuthBearerError("Invalid OAUTHBEARER client first message: bad key=value")
        if key == b"auth":
            if token is not None:
                raise OAuthBearerError("Invalid OAUTHBEARER client first message: two auth")
            scheme, _, rest = value.partition(b" ")
            if scheme.lower() != b"bearer" or not rest.strip():
                raise OAuthBearerError("Invalid OAUTHBEARER client first message: "
                                       "auth is not 'Bearer <token>'")
            token = rest.strip().decode("ascii", "replace")
        else:
            extensions[key.decode()] = value.decode("utf-8", "replace")
    if token is None:
        raise OAuthBearerError("Invalid OAUTHBEARER client first message: no auth")
    authzid = (gs2.group(1) or b"").decode("utf-8", "replace")
    return ClientResponse(authzid, token, extensions)


def _b64url_json(part: str, what: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise OAuthBearerError(f"Invalid unsecured JWS: the {what} is not base64url JSON") \
            from None
    if not isinstance(value, dict):
        raise OAuthBearerError(f"Invalid unsecured JWS: the {what} is not a JSON object")
    return value


def _number(claims: dict[str, Any], name: str) -> float | None:
    v = claims.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise OAuthBearerError(f"Invalid unsecured JWS: claim {name} is not a number")
    return float(v)


def validate_unsecured(token: str, options: ValidatorOptions, now_ms: int,
                       authzid: str = "") -> ValidToken:
    """Kafka's unsecured validation (module docstring). Raises OAuthBearerError."""
    pieces = token.split(".")
    if len(pieces) != 3:
        raise OAuthBearerError("Invalid unsecured JWS: not three dot-separated parts")
    header_b64, claims_b64, signature = pieces
    if signature:
        raise OAuthBearerError("Invalid unsecured JWS: it has a signature")
    header = _b64url_json(header_b64, "header")
    if header.get("alg") != "none":
        raise OAuthBearerError('Invalid unsecured JWS: the header\'s alg is not "none"')
    claims = _b64url_json(claims_b64, "claims")
    skew = options.clock_skew_ms
    exp = _number(claims, "exp")
    if exp is None:
        raise OAuthBearerError("Invalid unsecured JWS: no exp claim")
    expires_at_ms = int(exp * 1000)
    if now_ms - skew >= expires_at_ms:
        raise OAuthBearerError(f"The token expired at {expires_at_ms} ms (now {now_ms} ms, "
                               f"allowable clock skew {skew} ms)")
    iat = _number(claims, "iat")
    if iat is not None and int(iat * 1000) > now_ms + skew:
        raise OAuthBearerError(f"The token was issued in the future ({int(iat * 1000)} ms; "
                               f"now {now_ms} ms, allowable clock skew {skew} ms)")
    if iat is not None and exp <= iat:
        raise OAuthBearerError("Invalid unsecured JWS: exp is not after iat")
    principal = claims.get(options.principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise OAuthBearerError(f"Invalid unsecured JWS: no {options.principal_claim!r} "
                               "claim holding the principal name")
    if options.required_scope:
        raw = claims.get(options.scope_claim, [])
        scopes = set(raw.split()) if isinstance(raw, str) else {
            s for s in raw if isinstance(s, str)} if isinstance(raw, list) else set()
        missing = [s for s in options.required_scope if s not in scopes]
        if missing:
            raise OAuthBearerError(f"The token's {options.scope_claim!r} claim lacks the "
                                   f"required scope {' '.join(missing)}")
    if authzid and authzid != principal:
        raise OAuthBearerError(f"Authentication failed: Client requested an authorization "
                               f"id ({authzid[:128]}) that is different from the token's "
                               f"principal name ({principal[:128]})")
    return ValidToken(principal, expires_at_ms)


def error_challenge(options: ValidatorOptions) -> bytes:
    """The server challenge after a refused token (RFC 7628 section 3.2.2)."""
    body: dict[str, str] = {"status": "invalid_token"}
    if options.required_scope:
        body["scope"] = " ".join(options.required_scope)
    return json.dumps(body, separators=(",", ":")).encode()


def unsecured_token(principal: str, now_ms: int, lifetime_s: int = 3600,
                    scope: tuple[str, ...] = ()) -> str:
    """An unsecured JWS for `principal`, as Kafka's unsecured login handler makes."""
    def enc(obj: dict[str, Any]) -> str:
        raw = json.dumps(obj, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    claims: dict[str, Any] = {"sub": principal, "iat": now_ms / 1000,
                              "exp": now_ms / 1000 + lifetime_s}
    if scope:
        claims["scope"] = " ".join(scope)
    return f"{enc({'alg': 'none'})}.{enc(claims)}."


def client_response(token: str, authzid: str = "") -> bytes:
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return gs2.encode() + KVSEP + b"auth=Bearer " + token.encode() + KVSEP + KVSEP
