"""What an Envelope request (KIP-590) says about the client it carries.

A broker-only node does not answer the admin APIs that change metadata
(`forwarded` in broker/apis.py); it wraps the client's request in an Envelope
(API key 58) and sends it to the active controller, which authorizes and
answers it as the client — not as the relaying broker. The Envelope carries,
beside the client's request bytes (header included, as the client sent them):

request_principal
    The client's principal in the format of Kafka's
    `DefaultKafkaPrincipalBuilder.serialize` (its `DefaultPrincipalData`
    message, version 0, flexible), byte by byte:

        int16     version            0
        uvarint   len(type) + 1      compact string
        bytes     type               UTF-8, e.g. "User"
        uvarint   len(name) + 1      compact string
        bytes     name               UTF-8, e.g. "alice"
        int8      token_authenticated  0 or 1 (odradek: always 0)
        uvarint   0                  no tagged fields

    Only odradek brokers talk to odradek controllers, but the format is
    Kafka's, so a capture reads the same in Kafka's tools.
client_host_address
    The client's IP address as its packed bytes (4 for IPv4, 16 for IPv6), as
    Java's `InetAddress.getAddress()` gives it.

Malformed input raises `PrincipalDeserializationError` (the controller answers
PRINCIPAL_DESERIALIZATION_FAILURE) or `ValueError`.
"""

from __future__ import annotations

import ipaddress
import struct

from .framing import MalformedRequest, encode_uvarint, read_uvarint, skip_tagged_fields

PRINCIPAL_DATA_VERSION = 0
MAX_PRINCIPAL_FIELD_BYTES = 1 << 16  # a principal's type or name; Kafka has no smaller bound


class PrincipalDeserializationError(ValueError):
    pass


def _compact_string(s: str) -> bytes:
    raw = s.encode()
    return encode_uvarint(len(raw) + 1) + raw


def _read_compact_string(data: bytes, pos: int) -> tuple[str, int]:
    n, pos = read_uvarint(data, pos)
    if n == 0:
        raise PrincipalDeserializationError("null string in a principal")
    n -= 1
    if n > MAX_PRINCIPAL_FIELD_BYTES or pos + n > len(data):
        raise PrincipalDeserializationError(f"string of {n} bytes past the end")
    try:
        return data[pos:pos + n].decode(), pos + n
    except UnicodeDecodeError as e:
        raise PrincipalDeserializationError(str(e)) from e


def serialize_principal(principal_type: str, name: str) -> bytes:
    return b"".join((struct.pack(">h", PRINCIPAL_DATA_VERSION),
                     _compact_string(principal_type), _compact_string(name),
                     b"\x00", encode_uvarint(0)))


def deserialize_principal(data: bytes) -> tuple[str, str]:
    """(principal type, name) of a serialized principal."""
    if len(data) < 2:
        raise PrincipalDeserializationError("no version")
    (version,) = struct.unpack_from(">h", data, 0)
    if version != PRINCIPAL_DATA_VERSION:
        raise PrincipalDeserializationError(f"unknown principal data version {version}")
    try:
        principal_type, pos = _read_compact_string(data, 2)
        name, pos = _read_compact_string(data, pos)
        if pos >= len(data):
            raise PrincipalDeserializationError("no token_authenticated flag")
        pos = skip_tagged_fields(data, pos + 1)  # unknown tagged fields, as Kafka does
    except MalformedRequest as e:
        raise PrincipalDeserializationError(str(e)) from e
    if pos != len(data):
        raise PrincipalDeserializationError(f"{len(data) - pos} bytes after the principal")
    if not principal_type or not name:
        raise PrincipalDeserializationError("empty principal type or name")
    return principal_type, name


def pack_host(host: str) -> bytes:
    """The client's address as packed bytes (ValueError if it is not an IP)."""
    return ipaddress.ip_address(host).packed


def unpack_host(data: bytes) -> str:
    if len(data) not in (4, 16):
        raise ValueError(f"a client address of {len(data)} bytes")
    return str(ipaddress.ip_address(data))
