"""Error codes a response version cannot carry, and what Kafka answers instead.

Some error codes came after the API versions a client may still speak: a
client that negotiated such a version does not know the newer code (it maps
it to an unknown server error, which it does not retry and which does not
fence it). Kafka's broker answers those versions with the older code that
leads the client to the same handling (`KafkaApis`, `ReplicaManager`,
`AddPartitionsToTxnManager`). The rules live on each API's line of the API
table (`apis.py`, `ApiSpec.older_errors`); the pipeline applies them to a
handler's answer before it is encoded (`downgrade`), so no handler needs to
know which version asked.

A rule is (code, since, instead): versions below ``since`` answer ``instead``
where the handler said ``code``. ``NEVER`` as ``since``: no version of the
API carries the code (e.g. PRODUCER_FENCED in a Produce answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NEVER = 1 << 15  # above every version: the API never carries the code

# the codes the rules name
NOT_LEADER_OR_FOLLOWER = 6
LEADER_NOT_AVAILABLE = 5
INVALID_REQUEST = 42
INVALID_PRODUCER_EPOCH = 47
KAFKA_STORAGE_ERROR = 56
TOPIC_DELETION_DISABLED = 73
OFFSET_NOT_AVAILABLE = 78
PRODUCER_FENCED = 90
INVALID_TXN_STATE = 48
TRANSACTION_ABORTABLE = 120


@dataclass(frozen=True, slots=True)
class OlderError:
    code: int  # the code a handler answers
    since: int  # the first API version that carries it
    instead: int  # what versions below `since` answer

    def applies(self, version: int) -> bool:
        return version < self.since


# KIP-588: PRODUCER_FENCED (90) reached InitProducerId in v4 and EndTxn,
# AddPartitionsToTxn, AddOffsetsToTxn in v2; older versions answer
# INVALID_PRODUCER_EPOCH (47), which those clients treat as fatal fencing.
def fenced_since(version: int) -> tuple[OlderError, ...]:
    return (OlderError(PRODUCER_FENCED, version, INVALID_PRODUCER_EPOCH),)


def downgrade(rules: tuple[OlderError, ...], version: int, data: dict[str, Any]) -> None:
    """Rewrite, in place, every ``*error_code`` in ``data`` (nested dicts and
    lists, as handlers build answers) that a rule says ``version`` cannot carry."""
    mapping = {r.code: r.instead for r in rules if r.applies(version)}
    if mapping:
        _rewrite(data, mapping)


def _rewrite(node: Any, mapping: dict[int, int]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key.endswith("error_code"):
                code = getattr(value, "value", value)  # an int or kio's ErrorCode
                if type(code) is int and code in mapping:
                    node[key] = mapping[code]
            elif isinstance(value, (dict, list, tuple)):
                _rewrite(value, mapping)
    elif isinstance(node, (list, tuple)):
        for item in node:
            if isinstance(item, (dict, list, tuple)):
                _rewrite(item, mapping)
