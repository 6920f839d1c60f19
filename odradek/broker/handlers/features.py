"""UpdateFeatures (KIP-584): finalize feature levels in the metadata log
(metadata/features.py). Broker-only nodes relay it to the active controller
(apis.py: forwarded); the finalized levels reach every node in its image and
are listed by ApiVersions (handlers/api_versions.py)."""

from __future__ import annotations

from typing import Any

from ...metadata import features as F
from ..context import RequestContext
from ..services import QuotaServices


def _updates(ctx: RequestContext, req: Any) -> list[F.Update]:
    out = []
    for u in req.feature_updates:
        if ctx.api_version == 0:  # v0: a flag instead of an upgrade type
            kind = F.SAFE_DOWNGRADE if u.allow_downgrade else F.UPGRADE
        else:
            kind = int(u.upgrade_type)
        out.append(F.Update(u.feature, int(u.max_version_level), kind))
    return out


async def handle_update_features(broker: QuotaServices, ctx: RequestContext,
                                 req: Any) -> dict[str, Any]:
    updates = _updates(ctx, req)
    validate_only = bool(getattr(req, "validate_only", False))  # v1+
    async with broker.metadata_lock:
        image = broker.image
        results, records = F.update(image.features, updates, lambda: F.elr_safety_records(
            image.configs, int(broker.config.get("min.insync.replicas"))))
        if records and not validate_only:
            await broker.quorum.commit(records)
    return _answer(ctx.api_version, results)


def _answer(version: int, results: list[F.Result]) -> dict[str, Any]:
    failed = next((r for r in results if r.error_code), None)
    if version >= 2:  # v2 has no per-feature results: the first error
        return {"error_code": failed.error_code if failed else F.NONE,
                "error_message": failed.error_message if failed else None}
    return {"error_code": F.NONE, "error_message": None,
            "results": [{"feature": r.feature, "error_code": r.error_code,
                         "error_message": r.error_message} for r in results]}


def update_features_errors(req: Any, code: int, message: str) -> dict[str, Any]:
    """A refused UpdateFeatures (no ALTER on the cluster)."""
    return {"error_code": code, "error_message": message,
            "results": [{"feature": u.feature, "error_code": code, "error_message": message}
                        for u in req.feature_updates]}
