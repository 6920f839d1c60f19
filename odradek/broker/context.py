"""What a handler knows about the request it is answering."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

if TYPE_CHECKING:
    from .broker import Broker
    from .network import KafkaConnection


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    connection: "KafkaConnection | None"
    listener: str


# A handler gets the broker, the context and the decoded kio request and
# returns the response as a dict (see protocol/entities.py), or None for no
# response (acks=0 produce).
Handler = Callable[["Broker", RequestContext, Any], Awaitable[dict[str, Any] | None]]
