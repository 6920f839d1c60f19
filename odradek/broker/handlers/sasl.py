"""SaslHandshake and SaslAuthenticate (KIP-43, KIP-152, KIP-368).

Thin: the connection's SASL state machine is `ctx.sasl` (security/sasl.py);
these handlers translate requests to its calls and its results back. On a
listener that is not SASL (`ctx.sasl` is None) both answer ILLEGAL_SASL_STATE
and the connection stays open, as Kafka's KafkaApis does. An answer with an
error closes the connection after it is sent (the pipeline reads
`ctx.sasl.close_after_response`).
"""

from __future__ import annotations

import time
from typing import Any

from ...protocol import errors as E
from ..context import RequestContext
from ..services import NoServices


async def handle_sasl_handshake(broker: NoServices, ctx: RequestContext,
                                req: Any) -> dict[str, Any]:
    if ctx.sasl is None:
        return {"error_code": E.ILLEGAL_SASL_STATE, "mechanisms": []}
    result = ctx.sasl.handshake(req.mechanism, ctx.api_version)
    return {"error_code": result.error_code, "mechanisms": result.mechanisms}


async def handle_sasl_authenticate(broker: NoServices, ctx: RequestContext,
                                   req: Any) -> dict[str, Any]:
    if ctx.sasl is None:
        return {"error_code": E.ILLEGAL_SASL_STATE,
                "error_message": "SaslAuthenticate on a listener without SASL",
                "auth_bytes": b"", "session_lifetime": 0}
    result = ctx.sasl.authenticate(req.auth_bytes, ctx.api_version, int(time.time() * 1000))
    return {"error_code": result.error_code, "error_message": result.error_message,
            "auth_bytes": result.auth_bytes, "session_lifetime": result.session_lifetime_ms}
