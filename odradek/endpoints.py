"""Config values that name network endpoints: listeners, quorum voters, IP addresses.

`listeners` / `advertised.listeners` (`NAME://host:port,...`),
`listener.security.protocol.map` (`NAME:PROTOCOL,...`), `controller.quorum.voters`
entries (`id@host:port`, parsed by BrokerConfig with `parse_host_port`) and
`max.connections.per.ip.overrides` (`host:count,...`). Each parser raises ConfigError
naming the key; BrokerConfig (odradek/config.py) calls them from its typed properties.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Mapping
from typing import NamedTuple

from odradek.broker_config_defs import SECURITY_PROTOCOLS
from odradek.configdef import ConfigError

__all__ = [
    "Endpoint",
    "QuorumVoter",
    "normalize_address",
    "parse_connections_per_ip_overrides",
    "parse_endpoints",
    "parse_host_port",
    "parse_protocol_map",
]


class Endpoint(NamedTuple):
    """One listener address. An empty host means the default interface."""

    name: str
    host: str
    port: int


_ENDPOINT_RE = re.compile(r"\A([^:/\s]+)://\[?([0-9a-zA-Z\-%._:]*?)\]?:(-?[0-9]+)\Z")


def parse_endpoints(key: str, text: str,
                    protocol_map: Mapping[str, str]) -> list[Endpoint]:
    """Parse `NAME://host:port,...` (IPv6 hosts in brackets); names are upper-cased."""
    endpoints: list[Endpoint] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        match = _ENDPOINT_RE.match(item)
        if match is None:
            raise ConfigError(key, f"'{item}' is not a valid listener; expected "
                                   "NAME://host:port, e.g. PLAINTEXT://127.0.0.1:9092", text)
        name, host, port_text = match.group(1).upper(), match.group(2), match.group(3)
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ConfigError(key, f"port {port} of listener {name} is out of range "
                                   "0..65535", text)
        if name not in protocol_map:
            raise ConfigError(key, f"listener name {name} has no security protocol in "
                                   "listener.security.protocol.map", text)
        if any(e.name == name for e in endpoints):
            raise ConfigError(key, f"each listener must have a different name; {name} "
                                   "appears twice", text)
        endpoints.append(Endpoint(name, host, port))
    return endpoints


class QuorumVoter(NamedTuple):
    """One entry of controller.quorum.voters."""

    node_id: int
    host: str
    port: int


_HOST_PORT_RE = re.compile(r"\A\[?([0-9a-zA-Z\-%._:]+?)\]?:([0-9]+)\Z")


def parse_host_port(text: str) -> tuple[str, int] | None:
    match = _HOST_PORT_RE.match(text.strip())
    if match is None or int(match.group(2)) > 65535:
        return None
    return match.group(1), int(match.group(2))


def parse_protocol_map(text: str) -> dict[str, str]:
    key = "listener.security.protocol.map"
    result: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ConfigError(key, f"'{item}' is not NAME:PROTOCOL", text)
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(key, f"unknown security protocol {protocol} for listener "
                                   f"{name}; expected one of {', '.join(SECURITY_PROTOCOLS)}",
                              text)
        result[name] = protocol
    return result



def parse_connections_per_ip_overrides(text: str) -> dict[str, int]:
    """'host:count,host:count' (Kafka's CSV map; the last ':' splits, so a bare IPv6
    address works, as does [v6]:count) -> normalized address -> count."""
    key = "max.connections.per.ip.overrides"
    result: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host:
            raise ConfigError(key, f"'{item}' is not host:count", text)
        try:
            value = int(count.strip())
        except ValueError:
            raise ConfigError(key, f"the count of {host} is not an integer", text) from None
        if value < 0:
            raise ConfigError(key, f"the count of {host} must be at least 0", text)
        result[_resolve_address(key, host, text)] = value
    return result


def _resolve_address(key: str, host: str, text: str) -> str:
    try:
        return normalize_address(host)
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError as e:
        raise ConfigError(key, f"cannot resolve host {host}: {e}", text) from None
    return normalize_address(str(infos[0][4][0]))


def normalize_address(text: str) -> str:
    """An IP address as connection quotas key it: IPv4-mapped IPv6 as plain IPv4."""
    address = ipaddress.ip_address(text.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)

