"""InitProducerId.

Producer ids come from blocks recorded in the metadata log, so they stay unique
across restarts. A producer that sends its current id and epoch (KIP-360)
gets the epoch bumped; at the epoch's limit it gets a new id. A transactional
id goes to the transaction coordinator (handlers/txn.py), which keeps the id's
producer id and bumps its epoch.

v6 (KIP-939, two-phase commit) adds `enable2_pc` and `keep_prepared_txn` to
the request and the ongoing transaction's producer id and epoch to the answer
(-1 and -1: odradek keeps no prepared transactions). odradek has no 2PC, so it
answers as a Kafka broker with `transaction.two.phase.commit.enable=false`
(Kafka's default): `enable2_pc` gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED
(an authorization error, so a client cannot probe the setting), and
`keep_prepared_txn`, the recovery of a prepared transaction, INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from ...protocol import errors as E
from ...protocol.client import ChannelError
from ...security.resources import CLUSTER_NAME, ResourceType
from ...security.resources import AclOperation as Op
from ..context import RequestContext
from ..services import ProducerIdServices
from .txn import init_transactional_producer_id

MAX_EPOCH = 32767


async def handle_init_producer_id(
    broker: ProducerIdServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    if req.transactional_id is not None:
        if not ctx.authorize(Op.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            return {"error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "producer_id": -1,
                    "producer_epoch": -1}
        refused = _two_phase_commit_refusal(req)
        if refused:
            return {"error_code": refused, "producer_id": -1, "producer_epoch": -1}
        return await init_transactional_producer_id(broker, req)
    # idempotent: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (Kafka's rule)
    if not ctx.authorize(Op.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME) and \
            not ctx.authorize_any(Op.WRITE, ResourceType.TOPIC):
        return {"error_code": E.CLUSTER_AUTHORIZATION_FAILED, "producer_id": -1,
                "producer_epoch": -1}
    # Without a transactional id the transaction timeout means nothing (clients
    # send -1 or their default); Kafka ignores it too.
    producer_id = getattr(req, "producer_id", -1)
    epoch = getattr(req, "producer_epoch", -1)
    if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return {"error_code": 0, "producer_id": producer_id, "producer_epoch": epoch + 1}
    async with broker.metadata_lock:
        try:
            await broker.ensure_producer_ids()  # a broker-only node asks the controller
        except ChannelError:
            # no block and no controller: retriable, the client asks again
            return {"error_code": E.COORDINATOR_NOT_AVAILABLE, "producer_id": -1,
                    "producer_epoch": -1}
        new_id = broker.next_producer_id()
    return {"error_code": 0, "producer_id": new_id, "producer_epoch": 0}


def _two_phase_commit_refusal(req: Any) -> int:
    """KIP-939's flags (v6) on a broker without two-phase commit; 0: none set."""
    if getattr(req, "enable2_pc", False):
        return E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if getattr(req, "keep_prepared_txn", False):
        return E.INVALID_REQUEST
    return E.NONE
