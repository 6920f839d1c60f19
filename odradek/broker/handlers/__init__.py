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
)

HANDLERS: dict[int, Handler] = {}
for _module in (
    admin, api_versions, configs, fetch, groups, log_dirs, metadata, produce, producer_id
):
    HANDLERS.update(_module.HANDLERS)
