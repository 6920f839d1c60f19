"""The follower's side of replication: one fetcher per source broker.

`ReplicaFetcherManager.sync` follows the replica manager: every partition this
node follows (a replica, not the leader, with a leader) is fetched by the
fetcher of its leader's broker, over one connection per source broker (Kafka's
`num.replica.fetchers=1`). The request and its answer are encoded and read by
hand (`protocol/fetch_codec.py`): the records stay views into the received
frame down to the segment write. A fetcher sends full Fetch v12 requests with this
node's replica id, for each partition its log end offset, its leader epoch
and the latest epoch in its leader-epoch cache (KIP-320's last fetched
epoch). For each partition in the answer:

* records: whole batches, CRC-checked, appended with `append_as_follower`
  (the leader's offsets and epochs; the epoch cache learns from them); the
  follower's high watermark becomes min(leader's, own log end offset);
* a diverging epoch: truncate to min(the leader's end of that epoch, our own
  end of it) -- only the part that diverges (KIP-101/279), then fetch again;
* OFFSET_OUT_OF_RANGE below the leader's log start: start over there;
* a leadership error: wait for the metadata to say who leads now.

A replica out of the ISR whose partition the topic's
`follower.replication.throttled.replicas` names for this broker asks for no
more than the follower throttle holds, and is left out of a fetch while it is
spent (`replication_quota.py`).

Every wait is bounded: `replica.fetch.wait.max.ms` on the leader,
`replica.socket.timeout.ms` on the call, `replica.fetch.backoff.ms` after an
error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Protocol

from ..protocol import api
from ..protocol.client import ChannelError, KafkaChannel, stop_tasks
from ..protocol.fetch_codec import (
    REPLICA_FETCH_VERSION,
    FetchedPartition,
    FetchPosition,
    decode_replica_fetch,
    encode_replica_fetch,
)
from ..protocol.framing import MalformedRequest
from ..protocol.records import batch_crc_ok, iter_batch_headers
from ..replication.follower import follower_high_watermark, truncation_offset
from ..replication.node import ReplicaHost
from ..replication.quota import FOLLOWER, ReplicationQuota
from ..security.sasl_config import inter_broker_client
from ..storage.log import PartitionLog
from ..storage.log_manager import LogManager
from ..tiered.service import RemoteTier

if TYPE_CHECKING:
    from ..replication.replica_manager import Partition


class FetcherHost(ReplicaHost, Protocol):
    """What the follower's fetchers read of their node."""

    @property
    def log_manager(self) -> LogManager: ...
    @property
    def remote_tier(self) -> RemoteTier | None: ...

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
NOT_LEADER_ERRORS = {6, 74, 75, 3}  # NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC


class ReplicaFetcherManager:
    def __init__(self, broker: FetcherHost) -> None:
        self.broker = broker
        self.fetchers: dict[int, ReplicaFetcher] = {}
        # one follower-side throttle for all this broker's fetchers
        self.quota = ReplicationQuota(
            FOLLOWER, broker.node_id, broker.config.get("follower.replication.throttled.rate"))

    def sync(self) -> None:
        """Match the fetchers to the partitions this node follows now."""
        me = self.broker.node_id
        wanted: dict[int, set[TopicPartition]] = {}
        for key, part in self.broker.replica_manager.partitions.items():
            if part.leader not in (me, -1) and me in part.replicas:
                wanted.setdefault(part.leader, set()).add(key)
        for leader_id, fetcher in list(self.fetchers.items()):
            if leader_id not in wanted:
                fetcher.stop()
                del self.fetchers[leader_id]
        for leader_id, keys in wanted.items():
            existing = self.fetchers.get(leader_id)
            if existing is None:
                existing = ReplicaFetcher(self.broker, leader_id, self.quota)
                self.fetchers[leader_id] = existing
                existing.start()
            existing.partitions = keys
            existing.wake()

    async def stop(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        for fetcher in fetchers:
            fetcher.stop()
        await stop_tasks([f._task for f in fetchers])


class ReplicaFetcher:
    def __init__(self, broker: FetcherHost, leader_id: int, quota: ReplicationQuota) -> None:
        self.broker = broker
        self.leader_id = leader_id
        self.quota = quota
        self.partitions: set[TopicPartition] = set()
        config = broker.config
        self.wait_max_ms: int = config.get("replica.fetch.wait.max.ms")
        self.min_bytes: int = config.get("replica.fetch.min.bytes")
        self.max_bytes: int = config.get("replica.fetch.response.max.bytes")
        self.partition_max_bytes: int = config.get("replica.fetch.max.bytes")
        self.backoff_s: float = config.get("replica.fetch.backoff.ms") / 1000
        self.timeout_s: float = config.get("replica.socket.timeout.ms") / 1000
        self._channel: KafkaChannel | None = None
        self._address: tuple[str, int, str] | None = None
        # the leader's endpoint as of this metadata image (images are replaced,
        # never changed): looked up once per image, not once per fetch
        self._address_image: object = None
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        # partitions whose state is being built from the remote tier: not fetched
        self._restoring: set[TopicPartition] = set()
        self._restore_tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def wake(self) -> None:
        self._wakeup.set()

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for task in self._restore_tasks:
            task.cancel()
        if self._channel is not None:
            self._channel.close()


    def _leader_address(self) -> tuple[str, int, str] | None:
        """host, port and listener name of the leader's inter-broker endpoint."""
        b = self.broker.image.brokers.get(self.leader_id)
        if b is None or not b.endpoints:
            return None
        name = self.broker.config.inter_broker_listener_name
        ep = next((e for e in b.endpoints if e.listener == name), b.endpoints[0])
        return ep.host, ep.port, ep.listener

    def _channel_for_leader(self) -> KafkaChannel | None:
        image = self.broker.image
        if self._channel is not None and image is self._address_image:
            return self._channel
        address = self._leader_address()
        if address is None:
            return None
        self._address_image = image
        if self._channel is None or address != self._address:
            if self._channel is not None:
                self._channel.close()
            host, port, listener = address
            self._channel = KafkaChannel(host, port, client_id=b"odradek-replica-fetcher",
                                         ssl_context=self.broker.tls.client_context(listener),
                                         sasl=inter_broker_client(self.broker.config))
            self._address = address
        return self._channel

    def _fetchable(self) -> list[Partition]:
        rm = self.broker.replica_manager
        out = []
        for key in self.partitions:
            part = rm.partitions.get(key)
            if part is not None and part.leader == self.leader_id and not part.log.offline \
                    and key not in self._restoring:
                out.append(part)
        return out

    async def _run(self) -> None:
        while True:
            parts = self._fetchable()
            channel = self._channel_for_leader()
            if not parts or channel is None:
                await self._pause(self.backoff_s)
                continue
            try:
                failed = await self._fetch_once(channel, parts)
            except ChannelError as e:
                log.debug("fetch from broker %d failed: %s", self.leader_id, e)
                failed = True
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica fetcher for broker %d failed", self.leader_id)
                failed = True
            if failed:
                await self._pause(self.backoff_s)

    async def _pause(self, seconds: float) -> None:
        """Wait `seconds`, or less if the metadata wakes this fetcher."""
        self._wakeup.clear()
        try:
            await asyncio.wait_for(self._wakeup.wait(), seconds)
        except TimeoutError:
            pass

    async def _fetch_once(self, channel: KafkaChannel, parts: list[Partition]) -> bool:
        by_topic: dict[str, list[FetchPosition]] = {}
        sent: dict[TopicPartition, tuple[int, int]] = {}
        throttled: set[TopicPartition] = set()
        image, now_s, me = self.broker.image, time.monotonic(), self.broker.node_id
        for part in parts:
            plog = part.log
            key = (part.topic, part.partition)
            max_bytes = self.partition_max_bytes
            if me not in part.isr and self.quota.is_throttled(image, *key):
                max_bytes = min(max_bytes, self.quota.available(image, now_s))
                if max_bytes <= 0:
                    continue  # the follower throttle is spent: not in this fetch
                throttled.add(key)
            end = plog.log_end_offset
            by_topic.setdefault(part.topic, []).append((
                part.partition, part.leader_epoch, end,
                plog.leader_epoch_cache.latest_epoch(), plog.log_start_offset, max_bytes))
            sent[key] = (part.leader_epoch, end)
        if not sent:  # every partition throttled: wait for the bucket, not in a loop
            await self._pause(min(self.quota.seconds_until_available(image, now_s),
                                  self.backoff_s))
            return False
        # a full fetch (no session), encoded by hand: it goes out once per append
        body = encode_replica_fetch(me, self.wait_max_ms, self.min_bytes, self.max_bytes,
                                    by_topic)
        frame, pos = await channel.request_encoded(
            api.ApiKey.FETCH, REPLICA_FETCH_VERSION, body,
            timeout_s=self.timeout_s + self.wait_max_ms / 1000,
        )
        try:
            # records stay views into the frame, from the socket to the segment
            error_code, answers = decode_replica_fetch(frame, pos)
        except MalformedRequest as e:
            channel.close()
            raise ChannelError(f"broker {self.leader_id}: bad Fetch answer: {e}") from e
        if error_code != 0:
            return True
        failed = False
        rm = self.broker.replica_manager
        for p in answers:
            key = (p.topic, p.partition)
            if key in throttled:
                self.quota.record(image, len(p.records), time.monotonic())
            current = rm.partitions.get(key)
            if current is None or current.leader != self.leader_id or key not in sent:
                continue
            epoch, offset = sent[key]
            if current.leader_epoch != epoch or current.log.log_end_offset != offset:
                continue  # changed while the fetch was out: the next fetch decides
            if not self._apply(current, p):
                failed = True
        return failed

    def _apply(self, part: Partition, p: FetchedPartition) -> bool:
        code = p.error_code
        plog = part.log
        name = f"{part.topic}-{part.partition}"
        if code in NOT_LEADER_ERRORS:
            return False  # the metadata will move us; sync() wakes the fetcher
        if code == 1:  # OFFSET_OUT_OF_RANGE
            leader_start = p.log_start_offset
            if plog.log_end_offset < leader_start:
                log.warning("%s: behind the leader's log start %d: starting over there",
                            name, leader_start)
                plog.truncate_fully_and_start_at(leader_start)
                self._restore_from_remote(part, leader_start)
                return True
            log.warning("%s: fetch offset %d out of range on leader %d", name,
                        plog.log_end_offset, self.leader_id)
            return False
        if code != 0:
            log.info("%s: fetch from leader %d answered error %d", name, self.leader_id, code)
            return False
        diverging = p.diverging_epoch
        if diverging is not None and diverging != (-1, -1):
            self._truncate_diverging(part, *diverging)
            return True
        data = p.records
        if data:
            headers = [h for h in iter_batch_headers(data)]
            if headers:
                for h in headers:
                    if not batch_crc_ok(data, h):
                        log.warning("%s: batch at %d from leader %d fails its CRC", name,
                                    h.base_offset, self.leader_id)
                        return False
                end = headers[-1].position + headers[-1].size
                info = plog.append_as_follower(data[:end], headers)
                self.broker.replica_manager.purgatory.notify((part.topic, part.partition))
                flusher = self.broker.log_manager.flusher
                if info.flush_needed and flusher is not None:
                    flusher.request_flush(plog)
        hw = p.high_watermark
        if hw >= 0:
            plog.set_high_watermark(
                follower_high_watermark(hw, plog.log_end_offset, plog.high_watermark))
        return True

    def _restore_from_remote(self, part: Partition, start: int) -> None:
        """KIP-405: epochs and producer state from the remote tier (tiered/
        follower_restore.py) before the partition is fetched again."""
        tier = self.broker.remote_tier
        if tier is None or not part.log.config.remote_storage_enable:
            return
        key = (part.topic, part.partition)
        self._restoring.add(key)

        async def restore() -> None:
            try:
                await tier.restore_follower(part, start)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s-%d: building the follower from the remote tier failed",
                              *key)
            finally:
                self._restoring.discard(key)
                self.wake()

        task = asyncio.get_running_loop().create_task(restore())
        self._restore_tasks.add(task)
        task.add_done_callback(self._restore_tasks.discard)

    def _truncate_diverging(self, part: Partition, epoch: int, end_offset: int) -> None:
        plog = part.log
        target = truncation_offset(plog.leader_epoch_cache, plog.log_end_offset, epoch,
                                   end_offset)
        log.info("%s-%d: leader %d says epoch %d ends at %d: truncating %d -> %d",
                 part.topic, part.partition, self.leader_id, epoch, end_offset,
                 plog.log_end_offset, target)
        truncate_follower(plog, target)


def truncate_follower(plog: PartitionLog, offset: int) -> None:
    if offset < plog.log_start_offset:
        plog.truncate_fully_and_start_at(offset)
    else:
        plog.truncate_to(offset)
    # Epochs starting at or after the cut go too, even when no record did
    # (a leader that wrote nothing in its epoch leaves only a cache entry).
    plog.leader_epoch_cache.truncate_from_end(offset)
