"""A broker's link to the active controller.

Kafka's `BrokerLifecycleManager` plus the metadata observer of KRaft. A
broker-only node runs all of it; the broker role of a combined node among
several voters (`process.roles=broker,controller`) runs it without the
observer (`observer=False`: its metadata comes from its own voter) and talks
to the active controller like any broker, itself included when it is the
active one. A lone voter runs none of it (it is always the active controller).

* **Metadata.** The broker replicates `__cluster_metadata` by Fetch from the
  controller, as a KRaft observer does: fetch offset = its own metadata log
  end offset; the batches go to its own copy of the log
  (`MetadataQuorum.replicate`) and to its image. A restarted broker replays
  its copy first and continues from there. A fetch offset below the
  controller's log start is answered with its newest snapshot id: the broker
  fetches that snapshot in chunks (FetchSnapshot), installs it as its log
  start and image, and fetches on from its end offset.
* **Registration.** BrokerRegistration with a fresh incarnation id and the
  advertised endpoints of listeners already bound (`LifecycleHost.start` binds
  them before this starts; port 0 is the bound port); the controller
  answers the broker epoch. The broker stays fenced until a
  heartbeat shows it has replayed the metadata up to its registration.
* **Heartbeats** every `broker.heartbeat.interval.ms` carry the applied
  metadata offset and the directory ids of the log dirs that failed while
  the broker ran (`offline_log_dirs`, KIP-858; a failure sends one at once);
  a stale epoch means the controller forgot us: register
  again. `controlled_shutdown` sends `want_shut_down` until the controller
  has moved every leadership away (bounded by a timeout).
* **Requests for the controller**: AlterPartition, AllocateProducerIds,
  AssignReplicasToDirs (where new replicas were placed, KIP-858), and clients'
  admin requests in Envelopes (`forward`, KIP-590). The registration names the
  directory ids of the online log dirs.

The controller is found through `controller.quorum.voters` or
`controller.quorum.bootstrap.servers`. With several voters the broker talks
to one at a time and moves on (`_move_controller`) when that one is gone (a
dead connection) or is not the active controller (NOT_CONTROLLER, or a
metadata Fetch answered NOT_LEADER_OR_FOLLOWER, whose `current_leader` names
the quorum's leader: the broker goes there first, else to the next voter).
The new active controller knows the broker from the metadata log, so
heartbeats carry on with the same broker epoch. Every call has a timeout;
failures back off and retry.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from ..config import BrokerConfig, Endpoint
from ..metadata.cluster_control import AlterPartitionAnswer
from ..metadata.controller import NewTopic, Result
from ..metadata.image import MetadataImage
from ..metadata.quorum import METADATA_TOPIC, MetadataQuorum
from ..protocol import api
from ..protocol.client import ChannelError, KafkaChannel, stop_tasks
from ..raft.log import OffsetAndEpoch
from ..security.sasl_config import controller_client
from ..security.tls import ListenerTls
from ..storage.log import parse_kafka_uuid
from ..storage.log_manager import LogManager

log = logging.getLogger(__name__)


class LifecycleHost(Protocol):
    """What the lifecycle asks of its node (the LifecycleHost)."""

    node_id: int
    cluster_id: str
    config: BrokerConfig
    quorum: MetadataQuorum
    log_manager: LogManager
    tls: ListenerTls  # the controller listener's client context

    @property
    def image(self) -> MetadataImage: ...
    def advertised_listeners(self) -> list[Endpoint]: ...
    def online_directory_ids(self) -> list[uuid.UUID]: ...

METADATA_FETCH_MAX_WAIT_MS = 500
METADATA_FETCH_MAX_BYTES = 8 * 1024 * 1024
MAX_SNAPSHOT_BYTES = 1024 * 1024 * 1024  # a metadata snapshot larger than this is refused
RETRY_BACKOFF_S = 0.2
CALL_TIMEOUT_S = 10.0
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
STALE_BROKER_EPOCH = 77
NOT_LEADER_OR_FOLLOWER = 6
NOT_CONTROLLER = 41
# A controller that refused a connection is skipped this long when choosing
# the next one (about the quorum's fetch timeout: by then it is replaced or back).
UNREACHABLE_S = 2.0
BROKER_ID_NOT_REGISTERED = 102


def controller_addresses(broker: LifecycleHost) -> dict[int, tuple[str, int]]:
    """The controllers a broker may talk to, by voter id (bootstrap servers,
    whose ids are unknown, get -1, -2, ...)."""
    voters = broker.config.quorum_voters
    if voters:
        return {v.node_id: (v.host, v.port) for v in voters}
    servers = broker.config.quorum_bootstrap_servers
    if servers:
        return {-1 - i: server for i, server in enumerate(servers)}
    raise ValueError("a broker-only node needs controller.quorum.voters or "
                     "controller.quorum.bootstrap.servers")


class BrokerLifecycle:
    def __init__(self, broker: LifecycleHost, observer: bool = True) -> None:
        self.broker = broker
        self.observer = observer
        self._controllers = controller_addresses(broker)
        self._order = sorted(self._controllers, key=lambda n: (n < 0, abs(n)))
        self.controller_id = self._order[0]
        self._generation = 0  # bumped on every move to another controller
        self._unreachable_until: dict[int, float] = {}  # loop time, by controller
        # old forwarding channels closing once idle (_close_channels)
        self._closing: set[asyncio.Task[None]] = set()
        self._open_channels()
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        self._registered_epoch = -1  # the last epoch this process registered with
        self.fenced = True
        self.caught_up = asyncio.Event()
        self.unfenced = asyncio.Event()
        self._shutting_down = False
        self._tasks: list[asyncio.Task[None]] = []
        self.interval_s: float = broker.config.get("broker.heartbeat.interval.ms") / 1000
        # The leadership lease (coordinator reads, coordinator/replicated.py): the
        # controller fences this broker `broker.session.timeout.ms` after it last
        # received a heartbeat, so until (send time of the last heartbeat answered
        # unfenced) + that timeout no other broker can have been elected in its
        # place by a fencing. A process paused or cut off past it may be a zombie
        # leader; it must not answer reads from its possibly stale state.
        self._session_s: float = broker.config.get("broker.session.timeout.ms") / 1000
        self.lease_until = 0.0  # time.monotonic()
        # set to send the next heartbeat now (a log dir went offline, KIP-858)
        self._heartbeat_due = asyncio.Event()

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._heartbeat_loop())]
        if self.observer:
            self._tasks.append(loop.create_task(self._metadata_loop()))

    async def wait_ready(self, timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(self.unfenced.wait(), timeout_s)
            return True
        except TimeoutError:
            return False

    async def stop(self) -> None:
        await stop_tasks([*self._tasks, *self._closing])
        self._close_channels()

    # -- which controller ---------------------------------------------------------------

    def _open_channels(self) -> None:
        host, port = self._controllers[self.controller_id]
        tls = self.broker.tls.controller_client_context()
        sasl = controller_client(self.broker.config)
        self._heartbeats = KafkaChannel(host, port, b"odradek-broker-lifecycle", tls, sasl)
        self._metadata = KafkaChannel(host, port, b"odradek-metadata-observer", tls, sasl)
        self._requests = KafkaChannel(host, port, b"odradek-controller-requests", tls, sasl)
        self._forwarding = KafkaChannel(host, port, b"odradek-forwarding", tls, sasl)

    def _close_channels(self, let_forwarding_finish: bool = False) -> None:
        for ch in (self._heartbeats, self._metadata, self._requests):
            ch.close()
        if not let_forwarding_finish:
            self._forwarding.close()
            return
        # A client's forwarded request may be in flight on the old channel, already
        # applied by the old controller, its answer on the way (a RemoveRaftVoter of
        # that very controller: it commits, resigns, and our heartbeat's
        # NOT_CONTROLLER moves us on). Cut off, `forward` would send it again to the
        # next controller and answer the client that one's error (VOTER_NOT_FOUND).
        # The old channel closes once that answer is in (a controller that answers
        # NOT_CONTROLLER is alive; one found unreachable is cut off at once).
        closing = asyncio.get_running_loop().create_task(self._forwarding.close_when_idle())
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    def _move_controller(
        self, seen_generation: int, leader_hint: int = -1, unreachable: bool = False
    ) -> None:
        """The controller we talk to is gone (`unreachable`) or not the active
        one: go to the quorum leader it named, else to the next voter, skipping
        voters unreachable within UNREACHABLE_S (the others may still name a
        dead leader until they elect). A leader that names itself is becoming
        the active controller: stay. A caller that saw the failure before
        someone else moved (an older generation) changes nothing."""
        if seen_generation != self._generation or len(self._order) < 2:
            return
        now = asyncio.get_running_loop().time()
        if unreachable:
            self._unreachable_until[self.controller_id] = now + UNREACHABLE_S
        if leader_hint == self.controller_id:
            return

        def reachable(node: int) -> bool:
            return self._unreachable_until.get(node, 0.0) <= now

        if leader_hint in self._controllers and reachable(leader_hint):
            target = leader_hint
        else:
            at = self._order.index(self.controller_id)
            rotation = [self._order[(at + i) % len(self._order)] for i in range(1, len(self._order))]
            target = next((n for n in rotation if reachable(n)), rotation[0])
        # an unreachable controller will not answer: cut its requests off at once
        self._close_channels(let_forwarding_finish=not unreachable)
        self.controller_id = target
        self._generation += 1
        self._open_channels()
        log.debug("talking to controller %d now", target)

    async def _call(self, channel_name: str, api_key: int, version: int,
                    data: dict[str, Any]) -> Any:
        """One request to the controller we talk to; a dead connection or
        NOT_CONTROLLER moves us on (the caller still sees the failure and retries)."""
        generation = self._generation
        channel: KafkaChannel = getattr(self, channel_name)
        try:
            response = await channel.request(api_key, version, data, timeout_s=CALL_TIMEOUT_S)
        except ChannelError:
            self._move_controller(generation, unreachable=True)
            raise
        code = getattr(response, "error_code", 0)
        if int(getattr(code, "value", code)) == NOT_CONTROLLER:
            self._move_controller(generation)
        return response

    # -- metadata -------------------------------------------------------------------------

    async def _metadata_loop(self) -> None:
        quorum = self.broker.quorum
        while True:
            generation = self._generation
            request = {
                "cluster_id": None, "replica_id": self.broker.node_id,
                "max_wait": METADATA_FETCH_MAX_WAIT_MS, "min_bytes": 1,
                "max_bytes": METADATA_FETCH_MAX_BYTES, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": METADATA_TOPIC, "partitions": [{
                    "partition": 0, "current_leader_epoch": -1,
                    "fetch_offset": quorum.log_end_offset,
                    "last_fetched_epoch": quorum.last_fetched_epoch,
                    "log_start_offset": -1, "partition_max_bytes": METADATA_FETCH_MAX_BYTES,
                }]}],
                "forgotten_topics_data": [], "rack_id": "",
            }
            try:
                response = await self._metadata.request(
                    api.ApiKey.FETCH, 12, request,
                    timeout_s=CALL_TIMEOUT_S + METADATA_FETCH_MAX_WAIT_MS / 1000,
                )
                p = response.responses[0].partitions[0]
                code = int(getattr(p.error_code, "value", p.error_code))
                if code == NOT_LEADER_OR_FOLLOWER:  # a standby controller
                    leader = getattr(p, "current_leader", None)
                    hint = int(leader.leader_id) if leader is not None else -1
                    self._move_controller(generation, hint)
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    continue
                if code != 0:
                    log.warning("metadata fetch answered error %d", code)
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    continue
                snapshot = getattr(p, "snapshot_id", None)
                if snapshot is not None and int(snapshot.end_offset) >= 0:
                    await self._fetch_snapshot(
                        OffsetAndEpoch(int(snapshot.end_offset), int(snapshot.epoch)))
                    continue
                if p.records:
                    quorum.replicate(bytes(p.records))
                if quorum.log_end_offset >= int(p.high_watermark):
                    self.caught_up.set()
            except ChannelError as e:
                log.debug("metadata fetch failed: %s", e)
                self._move_controller(generation, unreachable=True)
                await asyncio.sleep(RETRY_BACKOFF_S)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("metadata fetch failed")
                await asyncio.sleep(RETRY_BACKOFF_S)

    async def _fetch_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """Our metadata fetch offset is below the controller's log start: fetch
        its snapshot in chunks (FetchSnapshot v1, KIP-630) and install it; the
        metadata fetches go on from its end offset. An error starts over from
        a Fetch (the controller may have a newer snapshot by then)."""
        data = bytearray()
        size = -1
        while size < 0 or len(data) < size:
            response = await self._metadata.request(api.ApiKey.FETCH_SNAPSHOT, 1, {
                "cluster_id": None, "replica_id": self.broker.node_id,
                "max_bytes": METADATA_FETCH_MAX_BYTES,
                "topics": [{"name": METADATA_TOPIC, "partitions": [{
                    "partition": 0, "current_leader_epoch": -1,
                    "snapshot_id": {"end_offset": snapshot_id.offset,
                                    "epoch": snapshot_id.epoch},
                    "position": len(data), "replica_directory_id": None,
                }]}],
            }, timeout_s=CALL_TIMEOUT_S)
            p = response.topics[0].partitions[0]
            code = int(getattr(p.error_code, "value", p.error_code))
            if code or int(p.position) != len(data):
                log.warning("FetchSnapshot of %s answered error %d at %d", snapshot_id, code,
                            int(p.position))
                await asyncio.sleep(RETRY_BACKOFF_S)
                return
            size = int(p.size)
            if len(data) + len(p.unaligned_records or b"") > MAX_SNAPSHOT_BYTES:
                raise ValueError(f"metadata snapshot {snapshot_id} exceeds {MAX_SNAPSHOT_BYTES}")
            data += bytes(p.unaligned_records or b"")
            if not p.unaligned_records and len(data) < size:
                raise ValueError(f"FetchSnapshot of {snapshot_id} answered an empty chunk")
        records = self.broker.quorum.install_snapshot(snapshot_id, bytes(data))
        log.info("metadata snapshot %s fetched from controller %d: %d bytes, %d records",
                 snapshot_id, self.controller_id, len(data), records)

    # -- registration and heartbeats ----------------------------------------------------

    async def _register(self) -> bool:
        config = self.broker.config
        listeners = [
            {"name": ep.name, "host": ep.host, "port": ep.port,
             "security_protocol": SECURITY_PROTOCOL_IDS.get(
                 config.security_protocol(ep.name), 0)}
            for ep in self.broker.advertised_listeners()
        ]
        response = await self._call("_heartbeats", api.ApiKey.BROKER_REGISTRATION, 4, {
            "broker_id": self.broker.node_id, "cluster_id": self.broker.cluster_id,
            "incarnation_id": self.incarnation_id, "listeners": listeners, "features": [],
            "rack": config.get("broker.rack"), "is_migrating_zk_broker": False,
            "log_dirs": self.broker.online_directory_ids(),
            "previous_broker_epoch": self._previous_broker_epoch(),
        })
        code = int(getattr(response.error_code, "value", response.error_code))
        if code == NOT_CONTROLLER:  # no active controller yet (or it moved): ask again
            log.debug("broker registration answered NOT_CONTROLLER")
            return False
        if code != 0:
            log.warning("broker registration answered error %d", code)
            return False
        self.broker_epoch = self._registered_epoch = int(response.broker_epoch)
        log.info("registered with the controller: broker epoch %d", self.broker_epoch)
        return True

    def _previous_broker_epoch(self) -> int:
        """KIP-966: the epoch of this broker's last registration when it shut
        down cleanly (every log dir had its clean-shutdown marker; the epoch is
        in the metadata this broker replayed from its own copy), else -1. The
        controller takes a mismatch for an unclean shutdown and drops the
        broker from every ELR (metadata/elr.py). A re-registration within this
        process names the epoch it had: nothing was lost meanwhile."""
        if self._registered_epoch >= 0:
            return self._registered_epoch
        clean = self.broker.log_manager.had_clean_shutdown
        me = self.broker.image.brokers.get(self.broker.node_id)
        if me is None or not clean or not all(clean.values()):
            return -1
        return me.epoch

    def lease_valid(self) -> bool:
        """True while no fencing can have moved this broker's leaderships away."""
        return time.monotonic() < self.lease_until

    async def _heartbeat(self, want_shut_down: bool = False) -> Any:
        sent = time.monotonic()
        response = await self._call("_heartbeats", api.ApiKey.BROKER_HEARTBEAT, 1, {
            "broker_id": self.broker.node_id, "broker_epoch": self.broker_epoch,
            "current_metadata_offset": self.broker.image.offset,
            "want_fence": False, "want_shut_down": want_shut_down,
            "offline_log_dirs": self.broker.log_manager.offline_directory_ids(),
        })
        code = int(getattr(response.error_code, "value", response.error_code))
        if code in (STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED):
            self.broker_epoch = -1
        elif code == 0:
            was_fenced = self.fenced
            self.fenced = bool(response.is_fenced)
            self.lease_until = 0.0 if self.fenced else sent + self._session_s
            if was_fenced and not self.fenced:
                log.info("unfenced by the controller")
                self.unfenced.set()
            elif self.fenced and not was_fenced:
                log.warning("fenced by the controller")
                self.unfenced.clear()
        return response

    async def _heartbeat_loop(self) -> None:
        while True:
            try:
                if self._shutting_down:
                    await asyncio.sleep(self.interval_s)
                    continue
                if self.broker_epoch < 0 and not await self._register():
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    continue
                await self._heartbeat()
                # while fenced, heartbeat sooner: unfencing waits for it
                await self._until_heartbeat_due(self.interval_s if not self.fenced else
                                                min(self.interval_s, 0.1))
            except ChannelError as e:
                log.debug("heartbeat failed: %s", e)
                await asyncio.sleep(RETRY_BACKOFF_S)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("heartbeat failed")
                await asyncio.sleep(RETRY_BACKOFF_S)

    def heartbeat_now(self) -> None:
        """Send the next heartbeat without waiting out the interval: a log dir
        went offline and the controller should move leadership off it now, as
        Kafka's `propagateDirectoryFailure` does."""
        self._heartbeat_due.set()

    async def _until_heartbeat_due(self, interval_s: float) -> None:
        try:
            await asyncio.wait_for(self._heartbeat_due.wait(), interval_s)
        except TimeoutError:
            pass
        self._heartbeat_due.clear()

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move our leaderships away; True once it says
        we may stop."""
        if self.broker_epoch < 0:
            return True
        self._shutting_down = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            try:
                response = await self._heartbeat(want_shut_down=True)
                if bool(response.should_shut_down):
                    log.info("controlled shutdown: the controller moved our leaderships away")
                    return True
            except ChannelError:
                pass
            await asyncio.sleep(0.1)
        log.warning("controlled shutdown did not finish in %.0f s", timeout_s)
        return False

    # -- requests for the controller ----------------------------------------------------

    async def alter_partition(
        self, topic_id: str, partition: int, leader_epoch: int, partition_epoch: int,
        new_isr: list[int],
    ) -> AlterPartitionAnswer:
        response = await self._call("_requests", api.ApiKey.ALTER_PARTITION, 3, {
            "broker_id": self.broker.node_id, "broker_epoch": self.broker_epoch,
            "topics": [{"topic_id": uuid.UUID(topic_id), "partitions": [{
                "partition_index": partition, "leader_epoch": leader_epoch,
                "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in new_isr],
                "leader_recovery_state": 0, "partition_epoch": partition_epoch,
            }]}],
        })
        code = int(getattr(response.error_code, "value", response.error_code))
        if code:
            return AlterPartitionAnswer(code)
        p = response.topics[0].partitions[0]
        return AlterPartitionAnswer(
            int(getattr(p.error_code, "value", p.error_code)), int(p.leader_id),
            int(p.leader_epoch), tuple(int(b) for b in p.isr), int(p.partition_epoch),
        )

    async def assign_replicas_to_dirs(self, assignments: list[tuple[str, int, str]]) -> None:
        """AssignReplicasToDirs v0; raises ChannelError unless the controller
        took it (per-partition errors are logged: the image tells the rest)."""
        if self.broker_epoch < 0:
            raise ChannelError("not registered with the controller yet")
        by_dir: dict[str, dict[str, list[int]]] = {}
        for topic_id, partition, directory in assignments:
            by_dir.setdefault(directory, {}).setdefault(topic_id, []).append(partition)
        response = await self._requests.request(api.ApiKey.ASSIGN_REPLICAS_TO_DIRS, 0, {
            "broker_id": self.broker.node_id, "broker_epoch": self.broker_epoch,
            "directories": [{"id_": parse_kafka_uuid(d), "topics": [
                {"topic_id": uuid.UUID(t), "partitions": [{"partition_index": p} for p in ps]}
                for t, ps in topics.items()]} for d, topics in by_dir.items()],
        }, timeout_s=CALL_TIMEOUT_S)
        code = int(getattr(response.error_code, "value", response.error_code))
        if code:
            if code in (STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED):
                self.broker_epoch = -1
            raise ChannelError(f"AssignReplicasToDirs answered error {code}")
        for d in response.directories:
            for t in d.topics:
                for p in t.partitions:
                    error = int(getattr(p.error_code, "value", p.error_code))
                    if error:
                        log.warning("AssignReplicasToDirs: %s-%d answered error %d",
                                    t.topic_id, p.partition_index, error)

    async def allocate_producer_ids(self) -> tuple[int, int]:
        response = await self._call("_requests", api.ApiKey.ALLOCATE_PRODUCER_IDS, 0, {
            "broker_id": self.broker.node_id, "broker_epoch": self.broker_epoch,
        })
        code = int(getattr(response.error_code, "value", response.error_code))
        if code:
            raise ChannelError(f"AllocateProducerIds answered error {code}")
        return int(response.producer_id_start), int(response.producer_id_len)

    async def create_topics(
        self, topics: Sequence[NewTopic], validate_only: bool
    ) -> dict[str, Result]:
        """CreateTopics on the controller (auto-creation, internal topics), then
        wait (bounded) until our image has the created topics."""
        response = await self._call("_forwarding", api.ApiKey.CREATE_TOPICS, 7, {
            "topics": [{
                "name": t.name, "num_partitions": t.num_partitions,
                "replication_factor": t.replication_factor,
                "assignments": [{"partition_index": p, "broker_ids": list(b)}
                                for p, b in t.assignments.items()],
                "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
            } for t in topics],
            "timeout": 30000, "validate_only": validate_only,
        })
        results: dict[str, Result] = {}
        for t in response.topics:
            code = int(getattr(t.error_code, "value", t.error_code))
            results[t.name] = Result(code, t.error_message, t.topic_id if code == 0 else None,
                                     int(t.num_partitions), int(t.replication_factor))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CALL_TIMEOUT_S
        wanted = [n for n, r in results.items() if r.error_code == 0 and not validate_only]
        while loop.time() < deadline and any(
            n not in self.broker.image.topics_by_name for n in wanted
        ):
            await asyncio.sleep(0.02)
        return results

    async def forward(self, envelope: dict[str, Any]) -> Any:
        """Send a client's admin request to the active controller in an Envelope
        (KIP-590, pipeline.py builds it); a dead connection (a controller that
        died, or a standby that closed it) or NOT_CONTROLLER moves on to the next
        one until CALL_TIMEOUT_S has passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CALL_TIMEOUT_S
        while True:
            generation = self._generation
            try:
                response = await self._forwarding.request(api.ApiKey.ENVELOPE, 0, envelope,
                                                          timeout_s=CALL_TIMEOUT_S)
                if int(getattr(response.error_code, "value", response.error_code)) \
                        != NOT_CONTROLLER:
                    return response
                self._move_controller(generation)
                if loop.time() + RETRY_BACKOFF_S >= deadline:
                    return response
            except ChannelError:
                self._move_controller(generation, unreachable=True)
                if loop.time() + RETRY_BACKOFF_S >= deadline:
                    raise
            await asyncio.sleep(RETRY_BACKOFF_S)
