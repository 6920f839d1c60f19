"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them (KIP-84).

Sans I/O: `ScramServer` takes the client's messages and returns the server's,
`ScramClient` the other way round; neither reads a clock or a socket.

    client-first   n,,n=<user>,r=<client nonce>[,<extensions>]
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=biws,r=<nonce>,p=<base64 proof>
    server-final   v=<base64 server signature>

What is stored (`ScramCredential`, Kafka's UserScramCredentialRecord): the
salt, the iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key"))
and ServerKey = HMAC(SaltedPassword, "Server Key"); never the password nor the
salted password. The proof is checked by recomputing ClientKey from it and
comparing H(ClientKey) with StoredKey in constant time.

A user without a credential gets a server-first message like any other (a
salt derived from the name with a per-process secret, Kafka's default
iterations) and fails at the proof, so the exchange does not tell who exists.
Channel binding is not offered (gs2 header `n,,` or `y,,` only), as in Kafka.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass

# Kafka's ScramMechanism: name, hash, the id AlterUserScramCredentials uses,
# and the smallest iteration count Kafka accepts.
MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_IDS: dict[int, str] = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_ID_BY_NAME: dict[str, int] = {v: k for k, v in MECHANISM_IDS.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism.maxIterations: AlterUserScramCredentials' cap
DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32  # what Kafka's kafka-configs/kafka-storage generate (ScramFormatter.secureRandomBytes)
MAX_MESSAGE_BYTES = 4096  # a SCRAM message longer than this is refused, unparsed

_FAKE_SALT_KEY = secrets.token_bytes(32)


class ScramError(ValueError):
    """The exchange failed; the message is safe to send to the client and to log."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keys are secrets: never print them
        return f"ScramCredential(iterations={self.iterations})"


def _hash(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {mechanism}; expected one of "
                         f"{', '.join(MECHANISMS)}") from None


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with HMAC of the mechanism's hash."""
    return hashlib.pbkdf2_hmac(_hash(mechanism), password.encode(), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    h = _hash(mechanism)
    client_key = hmac.digest(salted, b"Client Key", h)
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(h, client_key).digest(),
        server_key=hmac.digest(salted, b"Server Key", h),
        iterations=iterations,
    )


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt,
                                                             iterations), salt, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise ScramError(f"Invalid SCRAM message: {what} is not base64") from None


def _attributes(message: str) -> dict[str, str]:
    """`a=value,b=value`: each attribute a single letter; values may hold '='."""
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
            raise ScramError("Invalid SCRAM message: malformed attribute")
        out.setdefault(part[0], part[2:])
    return out


def decode_saslname(name: str) -> str:
    """RFC 5802 saslname: '=2C' is ',' and '=3D' is '='; any other '=' is an error."""
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i:i + 3]
            if code == "=2C":
                out.append(",")
            elif code == "=3D":
                out.append("=")
            else:
                raise ScramError("Invalid SCRAM message: bad escape in user name")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _decode(message: bytes) -> str:
    if len(message) > MAX_MESSAGE_BYTES:
        raise ScramError("Invalid SCRAM message: too long")
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("Invalid SCRAM message: not UTF-8") from None


class ScramServer:
    """One server side of one exchange: `first(client_first)` then
    `final(client_final)`. A ScramError from either ends the exchange."""

    def __init__(self, mechanism: str,
                 lookup: Callable[[str, str], ScramCredential | None],
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._hash = _hash(mechanism)
        self._lookup = lookup
        self._server_nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self.username: str | None = None
        self.extensions: dict[str, str] = {}
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._gs2_header = ""
        self._server_first = ""
        self._nonce = ""
        self.done = False

    def first(self, message: bytes) -> bytes:
        text = _decode(message)
        # gs2-header: no channel binding ('n', or 'y': client supports, thinks we don't)
        # and no authzid (Kafka refuses one that differs from the user; we refuse any).
        if not (text.startswith(("n,", "y,"))):
            raise ScramError("Invalid SCRAM client first message: channel binding is "
                             "not supported")
        gs2_end = text.find(",", 2)
        if gs2_end < 0:
            raise ScramError("Invalid SCRAM client first message")
        authzid = text[2:gs2_end]
        bare = text[gs2_end + 1:]
        self._gs2_header = text[:gs2_end + 1]
        parts = bare.split(",")
        if (len(parts) < 2 or not parts[0].startswith("n=") or not parts[1].startswith("r=")
                or len(parts[1]) <= 2 or any("=" not in p or p.startswith("m=")
                                              for p in parts[2:])):
            raise ScramError("Invalid SCRAM client first message")
        username = decode_saslname(parts[0][2:])
        if authzid and decode_saslname(authzid.removeprefix("a=")) != username:
            raise ScramError("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        if not username:
            raise ScramError("Invalid SCRAM client first message: empty user name")
        self.username = username
        # Kafka's extensions (e.g. tokenauth=true for delegation tokens): kept, not used.
        self.extensions = dict(p.split("=", 1) for p in parts[2:])
        credential = self._lookup(username, self.mechanism)
        self._credential = credential
        if credential is None:
            salt = hmac.digest(_FAKE_SALT_KEY, f"{self.mechanism}:{username}".encode(),
                               "sha256")
            iterations = DEFAULT_ITERATIONS
        else:
            salt, iterations = credential.salt, credential.iterations
        self._client_first_bare = bare
        self._nonce = parts[1][2:] + self._server_nonce
        self._server_first = f"r={self._nonce},s={_b64(salt)},i={iterations}"
        return self._server_first.encode()

    def final(self, message: bytes) -> bytes:
        if not self._server_first or self.done:
            raise ScramError("Invalid SCRAM exchange: unexpected message")
        text = _decode(message)
        marker = text.rfind(",p=")
        if marker < 0:
            raise ScramError("Invalid SCRAM client final message: no proof")
        without_proof = text[:marker]
        attrs = _attributes(text)
        if attrs.get("c") != _b64(self._gs2_header.encode()):  # no channel binding data
            raise ScramError("Invalid SCRAM client final message: channel binding")
        # Kafka's ScramSaslServer checks endsWith, not equality: librdkafka up to
        # 2.0 (Debian's kcat) sends its client nonce again in front of ours.
        if not attrs.get("r", "").endswith(self._nonce):
            raise ScramError("Invalid SCRAM client final message: nonce mismatch")
        proof = _unb64(attrs.get("p", ""), "the proof")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        credential = self._credential
        failed = ScramError(f"Authentication failed during authentication due to invalid "
                            f"credentials with SASL mechanism {self.mechanism}")
        if credential is None:
            raise failed
        signature = hmac.digest(credential.stored_key, auth_message, self._hash)
        if len(proof) != len(signature):
            raise failed
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(),
                                   credential.stored_key):
            raise failed
        self.done = True
        server_signature = hmac.digest(credential.server_key, auth_message, self._hash)
        return f"v={_b64(server_signature)}".encode()


class ScramClient:
    """The client side (the broker's own clients, the tests): `first()`,
    `final(server_first)`, then `verify(server_final)`."""

    def __init__(self, mechanism: str, username: str, password: str,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._hash = _hash(mechanism)
        self._username = username
        self._password = password
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._client_first_bare = f"n={encode_saslname(username)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = _decode(server_first)
        attrs = _attributes(text)
        nonce, salt_text, iterations_text = attrs.get("r", ""), attrs.get("s"), attrs.get("i")
        if not nonce.startswith(self._nonce) or salt_text is None or iterations_text is None:
            raise ScramError("Invalid SCRAM server first message")
        try:
            iterations = int(iterations_text)
        except ValueError:
            raise ScramError("Invalid SCRAM server first message: iterations") from None
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ScramError(f"Invalid SCRAM server first message: {iterations} iterations")
        salted = salted_password(self.mechanism, self._password, _unb64(salt_text, "salt"),
                                 iterations)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        stored_key = hashlib.new(self._hash, client_key).digest()
        signature = hmac.digest(stored_key, auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.digest(salted, b"Server Key", self._hash)
        self._server_signature = hmac.digest(server_key, auth_message, self._hash)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attributes(_decode(server_final))
        if "e" in attrs:
            raise ScramError(f"SCRAM server error: {attrs['e']}")
        if not hmac.compare_digest(_unb64(attrs.get("v", ""), "the signature"),
                                   self._server_signature):
            raise ScramError("SCRAM server signature does not verify")
