"""ApiVersions: the versions of every API odradek answers."""

from __future__ import annotations

from typing import Any

from ...protocol import api
from ..context import RequestContext
from ..services import NoServices


async def handle_api_versions(broker: "NoServices", ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {
        "error_code": 0,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(api.SUPPORTED_VERSIONS.items())
        ],
    }
