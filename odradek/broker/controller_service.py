"""The active controller's asyncio shell: sessions, timers and the metadata log.

On a node with the controller role this runs `metadata/cluster_control.py`
against the live image while the node is the active controller: the Raft
leader of `metadata/raft_quorum.py` once its epoch's LeaderChange entry is
committed (a lone voter from its start), which calls `set_active`; a standby
answers NOT_CONTROLLER and rebuilds the sessions from the image when it
takes over. It handles broker registrations and heartbeats (handlers/cluster.py
calls in), the session check that fences silent brokers, the periodic
preferred-leader election (`auto.leader.rebalance.enable`), and AlterPartition
from leaders. Every change is a batch of metadata records appended under the
broker's metadata lock, so each controller decision sees the image the
previous one produced. Parked metadata fetches of observers (brokers) wake on
every append.

`commit` returns once a majority of the voters has the batch (a lone voter:
within the call).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Protocol

from ..configdef import ConfigError
from ..metadata import elr as ELR
from ..metadata import features as F
from ..metadata import records as R
from ..metadata.bootstrap import read_bootstrap_records
from ..metadata.cluster_control import AlterPartitionAnswer, ClusterControl, HeartbeatAnswer
from ..metadata.image import MetadataImage
from ..metadata.quorum import METADATA_TOPIC, MetadataQuorum
from ..metadata.raft_quorum import NotControllerError, RaftMetadataQuorum
from ..protocol.client import stop_tasks
from ..replication.node import NodeView
from ..replication.purgatory import FetchPurgatory


class ControllerHost(NodeView, Protocol):
    """What the active controller's service reads of its node."""

    @property
    def quorum(self) -> MetadataQuorum: ...
    @property
    def metadata_lock(self) -> asyncio.Lock: ...

log = logging.getLogger(__name__)

METADATA_KEY = (METADATA_TOPIC, 0)
SESSION_CHECK_INTERVAL_MS = 250
MIN_SESSION_CHECK_WAIT_MS = 20  # a session check never runs sooner than this after the last


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _log_dirs_taken_offline(
    image: MetadataImage, broker_id: int, offline_log_dirs: tuple[str, ...],
    records: list[R.MetadataRecord],
) -> None:
    """One line when a broker's failed log dirs leave its registration (the
    first record of the decision, ClusterControl.log_dirs_offline)."""
    broker = image.brokers.get(broker_id)
    if not offline_log_dirs or not records or broker is None:
        return
    first = records[0]
    if first["type"] != R.BROKER_REGISTRATION_CHANGE:
        return
    if "log_dirs" in first:
        what = f"its online log dirs are now {', '.join(first['log_dirs'])}"
    elif first.get("fenced") and set(broker.log_dirs) <= set(offline_log_dirs):
        what = "no log dir is left online: fenced"
    else:
        return
    log.warning(
        "broker %d reported failed log dirs %s: %s; %d partition change(s) move leadership "
        "and ISR membership off its replicas there", broker_id, ", ".join(offline_log_dirs),
        what, sum(1 for r in records if r["type"] == R.PARTITION_CHANGE),
    )


class ControllerService:
    def __init__(self, broker: ControllerHost) -> None:
        self.broker = broker
        config = broker.config
        self.control = ClusterControl(
            session_timeout_ms=config.get("broker.session.timeout.ms"),
            unclean_leader_election=self._unclean_enabled,
            imbalance_percentage=config.get("leader.imbalance.per.broker.percentage"),
            min_insync_replicas=lambda image, topic: ELR.min_insync_replicas(
                image, topic, int(config.get("min.insync.replicas"))),
        )
        self.metadata_waiters = FetchPurgatory()
        self._task: asyncio.Task[None] | None = None
        self.active = False
        self._fencing: list[int] = []  # brokers the current session check fences
        # `storage format --add-scram`'s records: committed by the first active
        # controller of a cluster whose metadata log is still empty
        try:
            self._bootstrap = read_bootstrap_records(config.metadata_log_dir)
        except (ValueError, OSError) as e:
            raise ConfigError("metadata.log.dir", f"bootstrap records: {e}") from None
        self._bootstrap_task: asyncio.Task[None] | None = None
        broker.quorum.listeners.append(self._on_metadata)
        assert isinstance(broker.quorum, RaftMetadataQuorum), "a controller is a voter"
        broker.quorum.leadership_listeners.append(self.set_active)

    def _unclean_enabled(self, image: MetadataImage, topic: str) -> bool:
        value = image.topic_configs(topic).get("unclean.leader.election.enable")
        if value is None:
            return bool(self.broker.config.get("unclean.leader.election.enable"))
        return value.strip().lower() == "true"

    def _on_metadata(self, old: MetadataImage, new: MetadataImage, records: object) -> None:
        self.metadata_waiters.notify(METADATA_KEY)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the timers (they act while this node is the active controller)."""
        self._task = asyncio.get_running_loop().create_task(self._timers())

    def set_active(self, active: bool) -> None:
        """Taking over rebuilds the sessions from the image: every registered
        broker gets a fresh session (Kafka's controller failover does the same)."""
        if active and not self.active:
            self.control.activate(self.broker.image, _now_ms())
            if self.broker.image.offset < 0:
                # a new cluster: `storage format`'s records and the feature
                # levels new clusters start at, queued on the metadata lock
                # before any request can be
                records = F.new_cluster_records(
                    self._bootstrap, int(self.broker.config.get("min.insync.replicas")))
                self._bootstrap_task = asyncio.get_running_loop().create_task(
                    self._commit_bootstrap(records))
        self.active = active
        self.metadata_waiters.notify(METADATA_KEY)  # parked observers: ask the leader

    async def stop(self) -> None:
        await stop_tasks([self._task, self._bootstrap_task])
        self._task = None

    async def _commit_bootstrap(self, records: list[R.MetadataRecord]) -> None:
        try:
            await self.decide(lambda image: list(records))
            log.info("bootstrap: committed %d record(s) to the new metadata log", len(records))
        except NotControllerError:
            pass  # leadership moved at once: the next active controller finds the log empty
        except Exception:
            log.exception("bootstrap records not committed")

    async def _timers(self) -> None:
        config = self.broker.config
        rebalance = bool(config.get("auto.leader.rebalance.enable"))
        rebalance_every_ms = 1000 * int(config.get("leader.imbalance.check.interval.seconds"))
        next_rebalance_ms = _now_ms() + rebalance_every_ms
        while True:
            # Wake at the first session's end (not up to a whole interval after it):
            # the fence, and so the failover, starts when the session runs out.
            wait_ms = SESSION_CHECK_INTERVAL_MS
            if self.active:
                end = self.control.next_session_expiry_ms(self.broker.image)
                if end is not None:
                    wait_ms = max(MIN_SESSION_CHECK_WAIT_MS, min(wait_ms, end - _now_ms()))
            await asyncio.sleep(wait_ms / 1000)
            if not self.active:
                continue
            try:
                now = _now_ms()
                self._fencing = []
                await self.decide(functools.partial(self._fence_silent, now_ms=now))
                if self._fencing:
                    # detect -> elect -> committed: bench/failover.py reads these two lines
                    log.info("fenced broker(s) %s: committed %d ms after the session check",
                             self._fencing, _now_ms() - now)
                if rebalance and now >= next_rebalance_ms:
                    next_rebalance_ms = now + rebalance_every_ms
                    await self.decide(self.control.preferred_leader_elections)
            except NotControllerError:
                pass  # leadership moved during the round; the new leader runs them
            except Exception:  # a bug in one round must not stop the timers
                log.exception("controller timer round failed")

    def _fence_silent(self, image: MetadataImage, now_ms: int) -> list[R.MetadataRecord]:
        # The controller's own broker (combined mode) has no session to lose.
        self.control.last_contact_ms[self.broker.node_id] = now_ms
        last = dict(self.control.last_contact_ms)
        records = self.control.check_sessions(image, now_ms)
        fenced = [r["broker_id"] for r in records if r["type"] == R.BROKER_REGISTRATION_CHANGE]
        if fenced:
            self._fencing = fenced
            log.warning("fencing broker(s) %s: no heartbeat for %s ms (broker.session.timeout.ms"
                        " %d)", fenced, [now_ms - last.get(b, now_ms) for b in fenced],
                        self.control.session_timeout_ms)
        return records

    # -- decisions -----------------------------------------------------------------------

    async def decide(
        self, decision: Callable[[MetadataImage], list[R.MetadataRecord]]
    ) -> MetadataImage:
        """Run a pure decision on the current image and append its records."""
        async with self.broker.metadata_lock:
            if not self.active:
                raise NotControllerError(getattr(self.broker.quorum, "leader_id", -1))
            records = decision(self.broker.image)
            return await self.broker.quorum.commit(records)

    async def register(
        self, broker_id: int, incarnation_id: str, endpoints: list[dict[str, object]],
        rack: str | None, log_dirs: list[str] | None = None,
        previous_broker_epoch: int | None = None,
    ) -> tuple[int, int]:
        """(error code, broker epoch)"""
        result: list[int] = []

        def decision(image: MetadataImage) -> list[R.MetadataRecord]:
            code, records = self.control.register(
                image, broker_id, incarnation_id, endpoints, rack, _now_ms(),
                log_dirs=log_dirs, previous_broker_epoch=previous_broker_epoch,
            )
            result.append(code)
            return records

        image = await self.decide(decision)
        b = image.brokers.get(broker_id)
        log.info("broker %d registered (epoch %d, fenced until caught up)", broker_id,
                 b.epoch if b else -1)
        return result[0], (b.epoch if b else -1)

    async def heartbeat(
        self, broker_id: int, broker_epoch: int, current_metadata_offset: int,
        want_fence: bool, want_shut_down: bool, offline_log_dirs: tuple[str, ...] = (),
    ) -> HeartbeatAnswer:
        answers: list[HeartbeatAnswer] = []

        def decision(image: MetadataImage) -> list[R.MetadataRecord]:
            answer, records = self.control.heartbeat(
                image, broker_id, broker_epoch, current_metadata_offset, want_fence,
                want_shut_down, _now_ms(), offline_log_dirs,
            )
            answers.append(answer)
            _log_dirs_taken_offline(image, broker_id, offline_log_dirs, records)
            return records

        await self.decide(decision)
        return answers[0]

    async def log_dirs_offline(self, broker_id: int, offline_log_dirs: tuple[str, ...]) -> None:
        """The controller's own broker (a combined node) lost log dirs while it
        ran: what a broker-only node's heartbeat reports (KIP-858)."""

        def decision(image: MetadataImage) -> list[R.MetadataRecord]:
            records = self.control.log_dirs_offline(image, broker_id, offline_log_dirs)
            _log_dirs_taken_offline(image, broker_id, offline_log_dirs, records)
            return records

        await self.decide(decision)

    async def alter_partition(
        self, broker_id: int, topic_id: str, partition: int, leader_epoch: int,
        partition_epoch: int, new_isr: list[int],
    ) -> AlterPartitionAnswer:
        answers: list[AlterPartitionAnswer] = []

        def decision(image: MetadataImage) -> list[R.MetadataRecord]:
            answer, records = self.control.alter_partition(
                image, broker_id, topic_id, partition, leader_epoch, partition_epoch, new_isr
            )
            answers.append(answer)
            return records

        await self.decide(decision)
        return answers[0]

    async def assign_replicas_to_dirs(
        self, broker_id: int, broker_epoch: int | None, assignments: list[tuple[str, int, str]]
    ) -> tuple[int, dict[tuple[str, int], int]]:
        """AssignReplicasToDirs (KIP-858): (error code, code per partition)."""
        answers: list[tuple[int, dict[tuple[str, int], int]]] = []

        def decision(image: MetadataImage) -> list[R.MetadataRecord]:
            code, results, records = self.control.assign_replicas_to_dirs(
                image, broker_id, broker_epoch, assignments
            )
            answers.append((code, results))
            return records

        await self.decide(decision)
        return answers[0]

    async def allocate_producer_ids(self, broker_id: int, block_size: int) -> tuple[int, int]:
        starts: list[int] = []

        def decision(image: MetadataImage) -> list[R.MetadataRecord]:
            start = max(image.next_producer_id, 0)
            starts.append(start)
            return [R.producer_ids_record(broker_id, start + block_size)]

        await self.decide(decision)
        return starts[0], block_size

    async def unregister_broker(self, broker_id: int) -> int:
        """UnregisterBroker (KIP-631): 0 or BROKER_ID_NOT_REGISTERED."""
        codes: list[int] = []

        def decision(image: MetadataImage) -> list[R.MetadataRecord]:
            code, records = self.control.unregister(image, broker_id)
            codes.append(code)
            return records

        await self.decide(decision)
        if not codes[-1]:
            log.info("broker %d unregistered", broker_id)
        return codes[-1]

    async def elect_leaders(
        self, election_type: int, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], tuple[int, str | None]]:
        results: list[dict[tuple[str, int], tuple[int, str | None]]] = []

        def decision(image: MetadataImage) -> list[R.MetadataRecord]:
            answer, records = self.control.elect_leaders(image, election_type, partitions)
            results.append(answer)
            return records

        await self.decide(decision)
        return results[0]
