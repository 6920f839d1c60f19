"""Connections from this broker to the other brokers, one per node, by node id.

A broker that calls other brokers (transaction markers, KIP-890 verification)
holds one `PeerChannels` per purpose: each node gets one `KafkaChannel` on
the inter-broker listener from the metadata image, replaced when the node's
address changes, and at most `MAX_PEER_CHANNELS` are kept (the oldest is
closed first).
"""

from __future__ import annotations

import logging
from typing import Any

from ..protocol.client import ChannelError, KafkaChannel
from ..security.sasl_config import inter_broker_client
from .node import ClusterView

log = logging.getLogger(__name__)

MAX_PEER_CHANNELS = 64


def by_topic(partitions: list[tuple[str, int]]) -> dict[str, list[int]]:
    """(topic, partition) pairs grouped as the requests carry them."""
    grouped: dict[str, list[int]] = {}
    for topic, p in partitions:
        grouped.setdefault(topic, []).append(p)
    return grouped


class PeerChannels:
    def __init__(self, broker: ClusterView, client_id: bytes) -> None:
        self.broker = broker
        self.client_id = client_id
        self._channels: dict[int, tuple[tuple[str, int], KafkaChannel]] = {}

    def leader_of(self, topic: str, partition: int) -> int | None:
        t = self.broker.image.topics_by_name.get(topic)
        p = t.partitions.get(partition) if t is not None else None
        return p.leader if p is not None and p.leader >= 0 else None

    def channel(self, node_id: int) -> KafkaChannel | None:
        """The connection to ``node_id``, or None when the image has no address for it."""
        b = self.broker.image.brokers.get(node_id)
        if b is None or not b.endpoints:
            return None
        name = getattr(self.broker.config, "inter_broker_listener_name", None)
        ep = next((e for e in b.endpoints if e.listener == name), b.endpoints[0])
        address = (ep.host, ep.port)
        known = self._channels.get(node_id)
        if known is not None and known[0] == address:
            return known[1]
        if known is not None:
            known[1].close()
        elif len(self._channels) >= MAX_PEER_CHANNELS:
            _, (_, oldest) = self._channels.popitem()
            oldest.close()
        channel = KafkaChannel(*address, client_id=self.client_id,
                               ssl_context=self.broker.tls.client_context(ep.listener),
                               sasl=inter_broker_client(self.broker.config))
        self._channels[node_id] = (address, channel)
        return channel

    async def request(
        self,
        node_id: int,
        key: int,
        version: int,
        body: dict[str, Any],
        timeout_s: float,
        what: str,
    ) -> Any | None:
        """The response of ``node_id``, or None (logged) if it has no address or
        the call failed or timed out."""
        channel = self.channel(node_id)
        if channel is None:
            log.warning("%s: no address for broker %d", what, node_id)
            return None
        try:
            return await channel.request(key, version, body, timeout_s)
        except (ChannelError, OSError, TimeoutError) as e:
            log.warning("%s with broker %d failed: %s", what, node_id, e)
            return None

    def close(self) -> None:
        for _, channel in self._channels.values():
            channel.close()
        self._channels.clear()
