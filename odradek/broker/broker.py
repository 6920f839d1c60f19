"""The broker: wires the metadata quorum, the controller, the logs, the
coordinators and the request pipeline, and owns their lifecycle.

Requests go through `pipeline.RequestPipeline` (frame, header, route, authenticate,
decode, authorize, handle, throttle, encode); the pipeline hands each handler this
node as the services its API family uses (`services.py` names them).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import BrokerConfig, ConfigError, Endpoint
from ..coordinator.host import CoordinatorHost
from ..coordinator.service import GroupCoordinatorService
from ..coordinator.share_coordinator_service import ShareCoordinatorService
from ..coordinator.share_persister import SharePersister
from ..coordinator.transaction_service import TransactionCoordinatorService
from ..group_config import validate_group_configs
from ..metadata import records as R
from ..metadata.client_quotas import Quotas
from ..metadata.controller import Controller, NewTopic, Result
from ..metadata.image import MetadataImage
from ..metadata.quorum import MetadataLogSettings, MetadataQuorum
from ..metadata.raft_quorum import RaftMetadataQuorum, raft_config
from ..replication.leader_replication import LeaderReplication, ReplicationHost
from ..replication.replica_manager import ReplicaManager
from ..replication.scrubber import Scrubber
from ..security import scram
from ..security.sasl import SaslClientConfig, SaslServerConfig
from ..security.sasl_config import ConfigError as SaslConfigError
from ..security.sasl_config import controller_client, inter_broker_client, server_configs
from ..security.tls import ListenerTls
from ..storage.cleaner.manager import CleanerConfig, LogCleaner
from ..storage.flusher import Flusher
from ..storage.free_space import FreeSpaceFloor
from ..storage.index_cache import INDEX_CACHE
from ..storage.log import kafka_uuid_string
from ..storage.log_config import LogConfig
from ..storage.log_manager import LogManager
from ..tiered.metrics import RemoteTierCollector
from ..tiered.service import RemoteTier
from ..topic_config import (
    InvalidConfig,
    describe_topic_config,
    effective_log_config,
    validate_dynamic_broker_configs,
    validate_topic_configs,
)
from . import services
from .connection_limits import ConnectionLimits
from .controller_service import ControllerHost, ControllerService
from .dir_reports import DirectoryReportHost, DirectoryReports
from .fd_budget import FdBudget, configure_segment_files, raise_open_files_limit
from .fetch_memory import FetchMemory
from .fetch_session import FetchSessionCache
from .handlers import admin
from .lifecycle import BrokerLifecycle, LifecycleHost
from .log_dir_moves import LogDirMoves
from .log_tasks import LogTasks
from .metrics import BrokerMetrics, MetricsHost
from .network import ConnectionHost, KafkaConnection
from .node_setup import ListenerBindError, find_or_make_cluster_id, make_authorizer
from .pipeline import PipelineHost, RequestPipeline
from .producer_ids import ProducerIdBlocks
from .remote_metadata import RemoteMetadataPublisher
from .replica_fetcher import FetcherHost, ReplicaFetcherManager
from .share_service import ShareService

log = logging.getLogger(__name__)

# How long a starting broker waits to be unfenced before it serves its listeners anyway.
BROKER_STARTUP_WAIT_S = 30.0
CONTROLLED_SHUTDOWN_TIMEOUT_S = 10.0


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        # TLS contexts of the TLS listeners and of the listeners this node dials: a
        # bad ssl.* key stops start-up here with a ConfigError naming it.
        self.tls = ListenerTls(config)
        self.node_id: int = config.node_id
        self.socket_request_max_bytes: int = config.get("socket.request.max.bytes")
        self.connections: set[KafkaConnection] = set()
        # SASL: each SASL listener's settings (users of PLAIN; SCRAM credentials
        # are read from the image when a client authenticates), and how this
        # node's own clients log in to other nodes' SASL listeners.
        try:
            self.sasl_listeners: dict[str, SaslServerConfig] = server_configs(
                config, self._scram_credential)
            self.inter_broker_sasl: SaslClientConfig | None = inter_broker_client(config)
            self.controller_sasl: SaslClientConfig | None = controller_client(config)
        except SaslConfigError as e:
            raise ConfigError(e.key, e.reason, e.value, message=e.message) from None
        self.started_ms = int(time.time() * 1000)
        self.log_dirs: list[Path] = list(config.log_dirs)
        self.metadata_dir = config.metadata_log_dir
        self.cluster_id = find_or_make_cluster_id(self.log_dirs, config.get("cluster.id"))
        self.default_log_config: LogConfig = config.log_config()
        self.log_manager = LogManager(
            self.log_dirs, self.default_log_config, self.cluster_id, self.node_id,
            recovery_threads=config.get("num.recovery.threads.per.data.dir"),
        )
        # None on a controller-only node: it hosts no partitions
        self.fd_budget = (FdBudget(config.get("odradek.open.files.reserve"))
                          if "broker" in config.process_roles else None)
        self.log_manager.free_space = FreeSpaceFloor(
            config.get("log.dir.free.space.min.bytes"),
            config.get("log.dir.free.space.min.percent"))
        raft = raft_config(config)
        settings = MetadataLogSettings.from_config(config)
        # A controller is a voter (alone or among several); a broker-only node
        # is an observer of the controllers' quorum.
        self.quorum: MetadataQuorum = (
            MetadataQuorum(self.metadata_dir, self.node_id, settings) if raft is None
            else RaftMetadataQuorum(self.metadata_dir, self.node_id, raft, self.cluster_id,
                                    settings, self.tls.controller_client_context(),
                                    sasl=self.controller_sasl)
        )
        if isinstance(self.quorum, RaftMetadataQuorum):
            self.quorum.bootstrap_servers = config.quorum_bootstrap_servers
        self.controller = Controller(
            default_num_partitions=config.get("num.partitions"),
            default_replication_factor=config.get("default.replication.factor"),
            validate_configs=self._validate_topic_configs,
            topic_config_default=self._topic_config_default,
            validate_broker_configs=validate_dynamic_broker_configs,
            validate_group_configs=functools.partial(validate_group_configs, config),
        )
        self.replica_manager = ReplicaManager(self.node_id, self.log_manager, self._log_config_for)
        # AlterReplicaLogDirs: replicas moving between this node's log dirs
        self.log_dir_moves = LogDirMoves(
            self.replica_manager, config.get("replica.alter.log.dirs.io.max.bytes.per.second"))
        # Replica placements and failed log dirs, told to the controller (KIP-858).
        self.dir_reports = DirectoryReports(self)
        self.replica_manager.on_assignments = self.dir_reports.assignments_due
        # The replica manager follows the image once it is published: at start
        # for a lone voter, else once the controller has unfenced this node
        # (its image then holds everything up to its registration). A stale
        # image from before a restart must not make it lead, set a high
        # watermark or fetch (Kafka publishes to its ReplicaManager only after
        # the broker caught up with the metadata log, too).
        self._published = False
        self.quorum.listeners.append(self._on_published_metadata)
        # Replication follows the replica manager's partitions (replication.py,
        # replica_fetcher.py); the controller role runs the cluster's control
        # (controller_service.py); a broker-only node reaches the controller
        # through its lifecycle (lifecycle.py).
        self.replication = LeaderReplication(self)
        self.scrubber = Scrubber(self)
        self.fetchers = ReplicaFetcherManager(self)
        self.quorum.listeners.append(self._sync_replication)
        roles = config.process_roles
        self.controller_service: ControllerService | None = (
            ControllerService(self) if "controller" in roles else None
        )
        self.is_broker = "broker" in roles
        # The broker role talks to the active controller over the network
        # (registration, heartbeats, AlterPartition, producer id blocks,
        # relayed admin requests) unless this node is the one voter, hence
        # always the active controller: then it decides on its own.
        self.single_voter = raft is not None and raft.voters.ids == {self.node_id}
        self.lifecycle: BrokerLifecycle | None = (
            BrokerLifecycle(self, observer=raft is None)
            if self.is_broker and not self.single_voter else None
        )
        self.producer_ids = ProducerIdBlocks(self.node_id, self.quorum, lambda: self.image,
                                             self.lifecycle)
        # Tiered storage (odradek/tiered): None unless remote.log.storage.system.enable.
        self.remote_tier = RemoteTier.create(
            config, self.node_id, lambda: list(self.replica_manager.partitions.values()),
            lambda topic_id: topic_id in self.image.topics_by_id)
        self.remote_metadata: RemoteMetadataPublisher | None = None
        if self.remote_tier is not None:
            self.remote_metadata = RemoteMetadataPublisher(self, self.remote_tier.rlm.settings)
            self.remote_tier.rlm.publish = self.remote_metadata.publish
        self.fetch_sessions = FetchSessionCache(
            config.get("max.incremental.fetch.session.cache.slots")
        )
        self.fetch_memory = FetchMemory(config.get("odradek.fetch.memory.max.bytes"))
        # Every listener's server, by listener name: bound first thing in
        # start(), accepting connections only once `_serve` starts it.
        self._servers: dict[str, asyncio.base_events.Server] = {}
        self.bound_ports: dict[str, int] = {}  # the port each listener bound (port 0: the real one)
        self.log_tasks: LogTasks | None = None
        self.log_cleaner: LogCleaner | None = None
        self.metadata_lock = asyncio.Lock()
        self.metrics = BrokerMetrics(self)
        if self.remote_tier is not None:
            self.metrics.registry.register(RemoteTierCollector(self.remote_tier))
        self.connection_limits = ConnectionLimits(config, self.metrics.registry,
                                                  lambda: self.image.client_quotas)
        self.group_coordinator = GroupCoordinatorService(self)
        # share groups (KIP-932) as a partition leader: sessions, share partitions,
        # their durable state with the share coordinator (__share_group_state)
        share_coordinator = ShareCoordinatorService(self)
        self.share = ShareService(config, self.log_dirs[0] if self.log_dirs else None,
                                  lambda: self.image, coordinator=share_coordinator,
                                  persister=SharePersister(self, share_coordinator))
        self.group_coordinator.share_groups.departure_listeners.append(self.share.member_left)
        self.txn_coordinator = TransactionCoordinatorService(self)
        # Every request passes the pipeline; its handlers get this node as their
        # services, each family seeing it through its own Protocol (services.py).
        self.authorizer = make_authorizer(config, lambda: self.quorum.image.acls)
        self.pipeline = RequestPipeline(self, self, authorizer=self.authorizer)

    # -- configuration helpers -----------------------------------------------

    def _validate_topic_configs(self, configs: Any) -> str | None:
        try:
            parsed = validate_topic_configs(configs)
        except InvalidConfig as e:
            return str(e)
        if parsed.get("remote.storage.enable") is True \
                and not self.config.get("remote.log.storage.system.enable"):
            return ("Tiered Storage functionality is disabled in the broker. Topic cannot be "
                    "configured with remote log storage (remote.storage.enable).")
        return None

    def _topic_config_default(self, name: str) -> str | None:
        for entry in describe_topic_config(self.config, {}):
            if entry.name == name:
                return entry.value
        return None

    def _log_config_for(self, image: MetadataImage, topic: str) -> LogConfig:
        return effective_log_config(self.config, image.topic_configs(topic),
                                    image.broker_configs(self.node_id),
                                    image.configs.get((R.RESOURCE_BROKER, ""), {}))

    def _load_config_for(self, image: MetadataImage, topic: str) -> LogConfig:
        try:
            return self._log_config_for(image, topic)
        except InvalidConfig as e:  # a stored override that no longer parses
            log.warning("topic %s: loading its logs with default configs: %s", topic, e)
            return self.default_log_config

    def leadership_lease_ok(self) -> bool:
        """False while this broker may have been fenced unknowingly (its last
        unfenced heartbeat is older than the session timeout: a pause or a cut
        from the controller), so another broker may lead its partitions: the
        coordinators then refuse reads (coordinator/replicated.py)."""
        return self.lifecycle is None or self.lifecycle.lease_valid()

    @property
    def image(self) -> MetadataImage:
        return self.quorum.image

    def _scram_credential(self, user: str, mechanism: str) -> scram.ScramCredential | None:
        found = self.image.scram_credentials.get((user, scram.MECHANISM_ID_BY_NAME[mechanism]))
        if found is None:
            return None
        return scram.ScramCredential(found.salt, found.stored_key, found.server_key,
                                     found.iterations)

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        started = time.monotonic()
        soft_limit, _ = raise_open_files_limit()
        configure_segment_files(self.config.get("odradek.log.segment.open.files.max"),
                                soft_limit, self.config.get("odradek.open.files.reserve"))
        INDEX_CACHE.configure(self.config.get("odradek.log.index.cache.max.bytes"))
        loop = asyncio.get_running_loop()
        # Bind before anything registers an endpoint (Kafka's SocketServer
        # binds before BrokerLifecycleManager registers): a taken port stops
        # startup here, and port 0 gets the real port the registration names.
        await self._bind_listeners()
        self.log_manager.attach_flusher(Flusher(loop))
        image = self.quorum.load()
        # Logs load with their topic's configs (index interval and size matter
        # when an index is rebuilt), so the metadata image comes first.
        metrics_port = self.config.get("odradek.metrics.port")
        if metrics_port >= 0:  # before the logs load: the load's progress is a metric
            self.metrics.serve(self.config.get("odradek.metrics.host"), metrics_port)
        # Off the event loop (recovery may take a while; the loop keeps the
        # metadata quorum's timers and the metrics going).
        await asyncio.to_thread(
            self.log_manager.startup, lambda topic: self._load_config_for(image, topic))
        if self.lifecycle is None:
            self._publish_metadata(image)
        if isinstance(self.quorum, RaftMetadataQuorum):
            # A lone voter is the active controller when this returns (the
            # leadership listener told the controller service).
            self.quorum.start()
        if self.controller_service is not None:
            self.controller_service.start()
            if self.is_broker and self.single_voter:
                await self._register()
        self.replication.start()
        self._sync_replication()
        self.dir_reports.start(loop)
        self.log_manager.on_dir_offline = self.dir_reports.on_dir_offline
        if self.lifecycle is not None and self.controller_service is not None:
            # A combined node among several voters: the others need our
            # controller listener to elect a leader before we can be unfenced.
            await self._serve(self.config.controller_listener_names)
        if self.lifecycle is not None:
            self.lifecycle.start()
            if not await self.lifecycle.wait_ready(BROKER_STARTUP_WAIT_S):
                log.warning("not unfenced by the controller after %.0f s; serving anyway",
                            BROKER_STARTUP_WAIT_S)
            else:
                self.producer_ids.start_prefetch()
            self._publish_metadata(self.image)
            self._sync_replication()
        if self.replica_manager.pending_assignments:
            self.dir_reports.assignments_due()
        self.group_coordinator.start()
        self.quorum.listeners.append(self.share.on_metadata)
        self.txn_coordinator.start()
        if self.share.coordinator is not None:
            self.share.coordinator.start()
        self.log_tasks = LogTasks(self.config, self.log_manager)
        self.log_tasks.start()
        self.metrics.loop_watch.start()
        self.scrubber.start()
        if self.remote_tier is not None:
            self.remote_tier.start()
        self.log_cleaner = LogCleaner(
            CleanerConfig.from_broker_config(self.config), self.log_manager
        )
        self.log_cleaner.start()
        await self._serve({e.name for e in self.config.listeners})
        log.info(
            "odradek node %d started in %.0f ms (cluster %s, %d partitions, log.dirs=%s)",
            self.node_id,
            (time.monotonic() - started) * 1000,
            self.cluster_id,
            len(self.replica_manager.partitions),
            ",".join(str(d) for d in self.log_dirs),
        )

    async def _bind_listeners(self) -> None:
        """Bind every listener's socket without accepting yet: a client that
        connects before `_serve` is refused, as before the broker started. A
        bound port is out of the kernel's choice for outgoing connections, so
        once this returns the endpoints we register are ours. A bind that
        fails closes those already bound and raises a ListenerBindError."""
        loop = asyncio.get_running_loop()
        for listener in self.config.listeners:
            try:
                server = await loop.create_server(
                    functools.partial(KafkaConnection, self, listener.name),
                    listener.host,
                    listener.port,
                    reuse_address=True,
                    backlog=1024,
                    start_serving=False,
                )
            except OSError as e:
                await self._close_servers()
                raise ListenerBindError(listener, e) from e
            self._servers[listener.name] = server
            self.bound_ports[listener.name] = int(server.sockets[0].getsockname()[1])
            log.info("bound listener %s to %s:%d", listener.name, listener.host,
                     self.bound_ports[listener.name])

    async def _serve(self, names: set[str] | frozenset[str]) -> None:
        """Start accepting connections on the listeners named (bound, not serving yet)."""
        for listener in self.config.listeners:
            server = self._servers[listener.name]
            if listener.name not in names or server.is_serving():
                continue
            await server.start_serving()
            log.info("listening on %s://%s:%d", listener.name, listener.host,
                     self.bound_ports[listener.name])

    async def _close_servers(self) -> None:
        self.connection_limits.stop()
        for server in self._servers.values():
            server.close()
        for conn in list(self.connections):
            conn.close()
        for server in self._servers.values():
            try:
                await asyncio.wait_for(server.wait_closed(), 2)
            except TimeoutError:
                pass

    def advertised_listeners(self) -> list[Endpoint]:
        """The endpoints a registration names: `advertised.listeners`, a port
        0 replaced by the port its listener bound (Kafka does the same)."""
        assert self.bound_ports, "the listeners are bound before the broker registers"
        return [ep._replace(port=self.bound_ports.get(ep.name, 0)) if ep.port == 0 else ep
                for ep in self.config.advertised_listeners]

    @property
    def is_active_controller(self) -> bool:
        return self.controller_service is not None and self.controller_service.active

    async def _register(self) -> None:
        """The one voter's own broker registration, decided on its own (it is
        the active controller); a node among several voters registers through
        `lifecycle.py` like any broker."""
        assert self.controller_service is not None
        endpoints = [
            {
                "listener": ep.name,
                "host": ep.host,
                "port": ep.port,
                "security_protocol": self.config.security_protocol(ep.name),
            }
            for ep in self.advertised_listeners()
        ]
        rack = self.config.get("broker.rack")
        log_dirs = [kafka_uuid_string(d) for d in self.online_directory_ids()]
        record = R.register_broker_record(self.node_id, endpoints, rack, log_dirs=log_dirs)
        current = self.image.brokers.get(self.node_id)
        # A registration left fenced (e.g. every log dir failed in the last run:
        # ClusterControl.log_dirs_offline fences a broker with no dir online) is
        # replaced too: as a Kafka broker registers anew at every start, with the
        # dirs it has online now, a restarted node comes back unfenced.
        if current is None or current.fenced or current.in_controlled_shutdown or [
            {
                "listener": e.listener,
                "host": e.host,
                "port": e.port,
                "security_protocol": e.security_protocol,
            }
            for e in current.endpoints
        ] != endpoints or current.rack != rack or current.log_dirs != tuple(sorted(log_dirs)):
            if current is not None and current.fenced and log_dirs:
                log.info("registering again with log dirs %s online (the last registration "
                         "was fenced)", ", ".join(sorted(log_dirs)))
            await self.controller_service.decide(lambda image: [record])
        # Leadership follows our log dirs: off replicas in a dir that is not
        # online, back onto those in a dir that is again (KIP-858).
        control = self.controller_service.control
        await self.controller_service.decide(
            lambda image: control.directory_changes(image, self.node_id))

    def online_directory_ids(self) -> list[uuid.UUID]:
        lm = self.log_manager
        return [lm.directory_ids[d] for d in lm.online_dirs() if d in lm.directory_ids]

    async def stop(self) -> None:
        if self.lifecycle is not None:
            # Kafka's controlled shutdown: leaderships move away before we go.
            await self.lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_S)
        await self.dir_reports.stop()
        await self.scrubber.stop()
        await self.log_dir_moves.stop()
        await self.fetchers.stop()
        await self.replication.stop()
        if self.lifecycle is not None:
            await self.lifecycle.stop()
        if self.controller_service is not None:
            await self.controller_service.stop()
        if isinstance(self.quorum, RaftMetadataQuorum):
            await self.quorum.stop()
        self.metrics.close()
        await self.metrics.loop_watch.stop()
        await self._close_servers()
        if self.log_cleaner is not None:
            await self.log_cleaner.stop()
        if self.log_tasks is not None:
            await self.log_tasks.stop()
        if self.remote_tier is not None:
            await self.remote_tier.stop()
        if self.remote_metadata is not None:
            self.remote_metadata.close()
        if self.log_manager.flusher is not None:
            await asyncio.to_thread(self.log_manager.flusher.shutdown)  # type: ignore[attr-defined]
        await self.group_coordinator.stop()
        await self.txn_coordinator.stop()
        if self.share.persister is not None:
            self.share.persister.close()
        if self.share.coordinator is not None:
            self.share.coordinator.close()
        self.replica_manager.shutdown()
        self.quorum.close()
        log.info("odradek node %d stopped", self.node_id)

    # -- replication and the controller ---------------------------------------------

    def _publish_metadata(self, image: MetadataImage) -> None:
        self.replica_manager.load_from_image(image)
        self._published = True
        log.info("metadata published to the replica manager at offset %d (%d partitions)",
                 image.offset, len(self.replica_manager.partitions))

    def _on_published_metadata(
        self, old: MetadataImage, new: MetadataImage, records: list[R.MetadataRecord]
    ) -> None:
        if self._published:
            self.replica_manager.on_metadata(old, new, records)

    def _sync_replication(self, *_: object) -> None:
        if not self._published:
            return
        for part in self.replica_manager.partitions.values():
            self.replication.sync(part)
        for key in list(self.replication.followers):
            if key not in self.replica_manager.partitions:
                self.replication.forget(key)
        self.fetchers.sync()

    async def alter_partition(
        self, topic_id: str, partition: int, leader_epoch: int, partition_epoch: int,
        new_isr: list[int],
    ) -> Any:
        if self.lifecycle is not None:
            return await self.lifecycle.alter_partition(
                topic_id, partition, leader_epoch, partition_epoch, new_isr
            )
        assert self.controller_service is not None
        return await self.controller_service.alter_partition(
            self.node_id, topic_id, partition, leader_epoch, partition_epoch, new_isr
        )

    async def create_topics(self, topics: Sequence[NewTopic],
                            validate_only: bool) -> dict[str, Result]:
        """Create topics as CreateTopics does (the coordinators' internal topics)."""
        return await admin.create_topics(self, topics, validate_only)

    # -- producer ids --------------------------------------------------------------

    async def ensure_producer_ids(self) -> None:
        await self.producer_ids.ensure()

    def next_producer_id(self) -> int:
        return self.producer_ids.next()

    # -- the request path (pipeline.py) ----------------------------------------------

    def connection_closed(self, conn: KafkaConnection) -> None:
        """A client connection closed: the share sessions it opened end."""
        self.share.connection_closed(conn.connection_id)

    async def handle_frame(self, frame: bytes, conn: KafkaConnection | None) -> Any:
        return await self.pipeline.handle(frame, conn)

    # What the pipeline asks of its node (pipeline.PipelineHost).

    @property
    def serves_controller_apis(self) -> bool:
        return self.controller_service is not None

    @property
    def forwarder(self) -> BrokerLifecycle | None:
        return self.lifecycle

    @property
    def controller_listener_names(self) -> frozenset[str]:
        return frozenset(self.config.controller_listener_names)

    def security_protocol(self, listener: str) -> str:
        return self.config.security_protocol(listener)

    def observe_request(self, api_key: int, seconds: float, closed: bool) -> None:
        self.metrics.observe(api_key, seconds, closed)

    @property
    def client_quotas(self) -> Quotas:
        return self.image.client_quotas

    @property
    def quota_window(self) -> tuple[int, int]:
        return (self.config.get("quota.window.num"), self.config.get("quota.window.size.seconds"))


if TYPE_CHECKING:
    def _broker_plays_every_role(b: Broker) -> None:
        """The Broker is the one object that plays every role below; mypy checks it."""
        r0: services.AdminServices = b
        r1: services.ClusterServices = b
        r2: services.ConfigServices = b
        r3: services.FetchServices = b
        r4: services.GroupServices = b
        r5: services.LogDirServices = b
        r6: services.MetadataServices = b
        r7: services.ProduceServices = b
        r8: services.ProducerIdServices = b
        r9: services.ReassignmentServices = b
        r10: services.ReplicaFetchServices = b
        r11: services.TxnServices = b
        r20: services.QuotaServices = b
        r12: CoordinatorHost = b
        r13: ReplicationHost = b
        r14: LifecycleHost = b
        r15: ConnectionHost = b
        r16: PipelineHost = b
        r17: ControllerHost = b
        r18: MetricsHost = b
        r19: FetcherHost = b
        r21: services.AclServices = b
        r22: services.ScramServices = b
        r23: DirectoryReportHost = b
        r24: services.ShareServices = b
        del r24, r23, r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12, r13, r14, r15, r16, r17, r18, r19, r20, r21, r22
