"""ApiVersions: the versions of every API odradek answers and, from v3, the
features this node supports and the cluster's finalized levels
(metadata/features.py)."""

from __future__ import annotations

from typing import Any

from ...metadata import features as F
from ...protocol import api
from ..context import RequestContext
from ..services import NoServices


async def handle_api_versions(broker: NoServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "error_code": 0,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(api.SUPPORTED_VERSIONS.items())
        ],
    }
    image = getattr(broker, "image", None)
    if ctx.api_version >= 3 and image is not None:
        answer["supported_features"] = [
            {"name": name, "min_version": lo, "max_version": hi}
            for name, (lo, hi) in sorted(F.SUPPORTED.items())]
        # the metadata offset that finalized them, as Kafka's epoch (>= 0 once known)
        answer["finalized_features_epoch"] = max(image.offset, 0)
        answer["finalized_features"] = [
            {"name": name, "max_version_level": level, "min_version_level": level}
            for name, level in sorted(image.features.items())]
    return answer
