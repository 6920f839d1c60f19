"""Request handlers, one module per API family; HANDLERS maps api_key -> handler."""

from __future__ import annotations

from ..context import Handler
from . import (
    admin,
    api_versions,
    configs,
    fetch,
    groups,
    log_dirs,
    metadata,
    produce,
    producer_id,
    reassignment,
    txn,
)

HANDLERS: dict[int, Handler] = {}
for _module in (
    admin, api_versions, configs, fetch, groups, log_dirs, metadata, produce, producer_id,
    reassignment, txn,
):
    HANDLERS.update(_module.HANDLERS)

# Cluster APIs last: its Fetch dispatcher (metadata observers, followers,
# consumers) takes the place of fetch.py's, which it calls for consumers.
from . import cluster  # noqa: E402

HANDLERS.update(cluster.HANDLERS)
