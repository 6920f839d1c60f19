"""What a Broker reads or builds before it wires its services: the cluster id
(`meta.properties`, else configured, else new), the authorizer from its config, and
the error a listener that cannot be bound raises. Imports only config and security.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..config import BrokerConfig, ConfigError, Endpoint
from ..security.acl import build_authorizer
from ..security.authorizer import Authorizer


class ListenerBindError(OSError):
    """A listener's socket could not be bound: startup stops before registering."""

    def __init__(self, listener: Endpoint, cause: OSError) -> None:
        reason = os.strerror(cause.errno) if cause.errno else str(cause)
        super().__init__(f"cannot bind listener {listener.name} to "
                         f"{listener.host}:{listener.port}: {reason}")


def make_authorizer(config: BrokerConfig, acls: Any) -> Authorizer:
    """`authorizer.class.name` (empty: everything allowed), `super.users`,
    `allow.everyone.if.no.acl.found`; the ACLs are the current image's."""
    key = "authorizer.class.name"
    try:
        return build_authorizer(config.get(key), config.get("super.users"),
                                bool(config.get("allow.everyone.if.no.acl.found")), acls)
    except ValueError as e:
        raise ConfigError(key, str(e)) from e


def find_or_make_cluster_id(log_dirs: list[Path], configured: str | None) -> str:
    """The cluster id from an existing meta.properties, else the configured one, else new."""
    import base64
    import uuid

    for d in log_dirs:
        meta = d / "meta.properties"
        if meta.exists():
            for line in meta.read_text().splitlines():
                if line.startswith("cluster.id="):
                    return line.split("=", 1)[1].strip()
    if configured:
        return configured
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
