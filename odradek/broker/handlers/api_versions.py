"""ApiVersions: the versions of every API odradek answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...protocol import api
from ..context import RequestContext

if TYPE_CHECKING:
    from ..broker import Broker


async def handle_api_versions(broker: "Broker", ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {
        "error_code": 0,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(api.SUPPORTED_VERSIONS.items())
        ],
    }


HANDLERS = {api.ApiKey.API_VERSIONS: handle_api_versions}
