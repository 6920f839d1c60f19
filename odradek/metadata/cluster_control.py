"""Cluster control: broker registration, heartbeats, fencing, elections, ISR changes.

The part of the controller that keeps brokers and partition leadership in
order, as Kafka's ``ClusterControlManager``, ``BrokerHeartbeatManager`` and
``ReplicationControlManager`` do. Pure: every method takes the current image
and the time (`now_ms`) and returns an answer plus the metadata records to
append; nothing here reads a clock, a socket or a file. The controller's
asyncio shell (`broker/controller_service.py`) appends the records and lets
the image follow.

Size: about 640 lines, kept in one module because registration, unregistration,
fencing, ISR changes and elections are one state machine over the same image; its
separable parts already live beside it (`elr.py`, the eligible leader replicas;
`reassignment.py`). The next split, if it grows: the leader elections
(`_elect_where_leaderless`, preferred and requested elections) into `elections.py`.

Rules (Kafka's):

* A broker registers with an incarnation id; the registration record starts
  it *fenced*. Its epoch is the offset of that record. It is unfenced by the
  first heartbeat that shows it has replayed the metadata log up to its
  registration (`current_metadata_offset >= epoch`).
* A broker without a heartbeat for `broker.session.timeout.ms` is fenced. A
  fenced (or shutting down) broker leaves every ISR it is in, unless it is
  the last member; where it led, the first other ISR member that is alive
  takes over in a new leader epoch; if there is none the partition has no
  leader (-1) until an ISR member comes back, or, with
  `unclean.leader.election.enable`, any live replica leads (and the ISR
  becomes just it: records it lacks are lost, as Kafka warns).
* Controlled shutdown (`want_shut_down`): leaderships move away first; the
  broker may stop (`should_shut_down`) once it leads nothing, and is fenced.
* AlterPartition comes from the leader, in its current leader epoch and
  partition epoch; the new ISR holds the leader, only replicas, and only
  live brokers when it grows. An ISR change of a partition being reassigned
  goes through `reassignment.change_record`, which completes the
  reassignment once the ISR holds the whole target.
* Preferred leaders: the first replica leads again when it is back in the
  ISR and the per-broker imbalance passes `leader.imbalance.per.broker.percentage`.
* Log dirs (KIP-858): a replica whose dir is not among its broker's online
  dirs neither leads nor joins the ISR. A dir that fails while the broker
  runs (BrokerHeartbeat `offline_log_dirs`) leaves the broker's online dirs,
  and its replicas there leave leadership and the ISR as a fenced broker's
  do; a broker with no dir left online is fenced.

Every partition change bumps the partition epoch (image.apply does); a new
leader always comes with leader epoch + 1. The heartbeat sessions are state
of the active controller only: a controller that starts gives every broker a
fresh session, as Kafka's does on failover.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import directories as D
from . import elr as ELR
from . import reassignment
from . import records as R
from .image import MetadataImage, PartitionImage, TopicImage, apply

NO_LEADER = -1

NONE = 0
NOT_LEADER_OR_FOLLOWER = 6
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
FENCED_LEADER_EPOCH = 74
STALE_BROKER_EPOCH = 77
UNKNOWN_TOPIC_ID = 100
INCONSISTENT_CLUSTER_ID = 104
INELIGIBLE_REPLICA = 107
INVALID_UPDATE_VERSION = 95
UNKNOWN_TOPIC_OR_PARTITION = 3
DUPLICATE_BROKER_REGISTRATION = 101
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
ELECTION_NOT_NEEDED = 84

ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1
BROKER_ID_NOT_REGISTERED = 102

# Brokers a controller keeps sessions for: far more than a cluster of Python
# brokers will have, and a bound on the map all the same.
MAX_BROKERS = 10_000


@dataclass(slots=True)
class HeartbeatAnswer:
    error_code: int = NONE
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


@dataclass(slots=True)
class AlterPartitionAnswer:
    error_code: int
    leader_id: int = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


UncleanPolicy = Callable[[MetadataImage, str], bool]


class ClusterControl:
    def __init__(
        self,
        session_timeout_ms: int,
        unclean_leader_election: UncleanPolicy,
        imbalance_percentage: int = 10,
        min_insync_replicas: ELR.MinIsrPolicy | None = None,
    ) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.unclean_leader_election = unclean_leader_election
        self.imbalance_percentage = imbalance_percentage
        # a topic's min.insync.replicas, which decides its eligible leader replicas
        self.min_insync_replicas: ELR.MinIsrPolicy = min_insync_replicas or (
            lambda image, topic: ELR.min_insync_replicas(image, topic, 1))
        self.last_contact_ms: dict[int, int] = {}

    # -- sessions --------------------------------------------------------------

    def activate(self, image: MetadataImage, now_ms: int) -> None:
        """This node became the active controller: every broker gets a fresh session."""
        self.last_contact_ms = {b: now_ms for b in list(image.brokers)[:MAX_BROKERS]}

    def with_elr(self, image: MetadataImage, records: list[R.MetadataRecord],
             unclean_shutdown: tuple[int, ...] = ()) -> list[R.MetadataRecord]:
        """The records with the eligible leader replicas their changes imply
        (metadata/elr.py); `image` is the one the records were decided on."""
        return ELR.complete(image, records, self.min_insync_replicas, unclean_shutdown)

    def _touch(self, broker_id: int, now_ms: int) -> None:
        if broker_id in self.last_contact_ms or len(self.last_contact_ms) < MAX_BROKERS:
            self.last_contact_ms[broker_id] = now_ms

    # -- registration ------------------------------------------------------------

    def register(
        self,
        image: MetadataImage,
        broker_id: int,
        incarnation_id: str,
        endpoints: list[dict[str, object]],
        rack: str | None,
        now_ms: int,
        fenced: bool = True,
        log_dirs: list[str] | None = None,
        previous_broker_epoch: int | None = None,
    ) -> tuple[int, list[R.MetadataRecord]]:
        """A broker (re)registers. The same incarnation registering again (a
        retry) changes nothing; a new incarnation replaces the old one, which
        is fenced first (its leaderships move). `previous_broker_epoch`
        (BrokerRegistration v3+, KIP-966) is the epoch its clean-shutdown
        marker recorded, -1 after an unclean shutdown: when it is not the
        broker's epoch here, the broker leaves every ELR (None: not told)."""
        current = image.brokers.get(broker_id)
        self._touch(broker_id, now_ms)
        if current is not None and current.incarnation_id == incarnation_id:
            return NONE, []
        records: list[R.MetadataRecord] = []
        if current is not None and fenced and not current.fenced:
            records += self._leave(image, broker_id)
        unclean: tuple[int, ...] = ()
        if (current is not None and previous_broker_epoch is not None
                and previous_broker_epoch != current.epoch and ELR.enabled(image)):
            unclean = (broker_id,)
            records += self._leave_elr(image, broker_id, records)
        records.append(
            R.register_broker_record(broker_id, endpoints, rack, fenced, incarnation_id, log_dirs)
        )
        return NONE, self.with_elr(image, records, unclean)

    def unregister(self, image: MetadataImage,
                   broker_id: int) -> tuple[int, list[R.MetadataRecord]]:
        """UnregisterBroker (KIP-631): the broker leaves as a fenced one would
        (leaderships, ISR and ELR memberships move away), then its registration
        goes. A live broker finds itself unknown at its next heartbeat and
        registers again, as in Kafka."""
        current = image.brokers.get(broker_id)
        if current is None:
            return BROKER_ID_NOT_REGISTERED, []
        records = [] if current.fenced else self._leave(image, broker_id)
        unclean: tuple[int, ...] = ()
        if ELR.enabled(image):
            unclean = (broker_id,)
            records += self._leave_elr(image, broker_id, records)
        records = self.with_elr(image, records, unclean)
        records.append(R.unregister_broker_record(broker_id, current.epoch))
        self.last_contact_ms.pop(broker_id, None)
        return NONE, records

    @staticmethod
    def _leave_elr(image: MetadataImage, broker_id: int,
                   records: list[R.MetadataRecord]) -> list[R.MetadataRecord]:
        """A change for each partition with `broker_id` in its ELR that `records`
        do not change yet (with_elr then takes the broker out of it)."""
        changed = {(r["topic_id"], r["partition"]) for r in records
                   if r["type"] == R.PARTITION_CHANGE}
        return [R.partition_change_record(str(t.topic_id), p.partition)
                for t, p in _partitions_with(image, broker_id)
                if broker_id in p.elr and (str(t.topic_id), p.partition) not in changed]

    def heartbeat(
        self,
        image: MetadataImage,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool,
        want_shut_down: bool,
        now_ms: int,
        offline_log_dirs: tuple[str, ...] = (),
    ) -> tuple[HeartbeatAnswer, list[R.MetadataRecord]]:
        """`offline_log_dirs`: the directory ids of the broker's log dirs that
        failed while it ran (KIP-858), repeated in every heartbeat."""
        answer, records = self._heartbeat(image, broker_id, broker_epoch,
                                          current_metadata_offset, want_fence, want_shut_down,
                                          now_ms, offline_log_dirs)
        return answer, self.with_elr(image, records)

    def _heartbeat(
        self, image: MetadataImage, broker_id: int, broker_epoch: int,
        current_metadata_offset: int, want_fence: bool, want_shut_down: bool, now_ms: int,
        offline_log_dirs: tuple[str, ...],
    ) -> tuple[HeartbeatAnswer, list[R.MetadataRecord]]:
        broker = image.brokers.get(broker_id)
        if broker is None:
            return HeartbeatAnswer(BROKER_ID_NOT_REGISTERED), []
        if broker_epoch != broker.epoch:
            return HeartbeatAnswer(STALE_BROKER_EPOCH), []
        self._touch(broker_id, now_ms)
        caught_up = current_metadata_offset >= broker.epoch
        records = self.log_dirs_offline(image, broker_id, offline_log_dirs)
        if records:
            image = apply(image, records, image.offset)
            broker = image.brokers[broker_id]
        # A broker with no registered dir left online stays fenced.
        want_fence = want_fence or _no_dir_online(broker.log_dirs, offline_log_dirs)
        if want_shut_down:
            if not broker.fenced and not broker.in_controlled_shutdown:
                records.append(R.broker_registration_change_record(
                    broker_id, in_controlled_shutdown=True))
                records += self._leave(image, broker_id)
                return HeartbeatAnswer(NONE, caught_up, False, False), records
            if broker.fenced or not _leads_anything(image, broker_id):
                if not broker.fenced:
                    records.append(R.broker_registration_change_record(broker_id, fenced=True))
                    records += self._leave(image, broker_id)
                return HeartbeatAnswer(NONE, caught_up, True, True), records
            records += self._leave(image, broker_id)
            return HeartbeatAnswer(NONE, caught_up, False, False), records
        if want_fence:
            if not broker.fenced:
                records.append(R.broker_registration_change_record(broker_id, fenced=True))
                records += self._leave(image, broker_id)
            return HeartbeatAnswer(NONE, caught_up, True, False), records
        if broker.fenced and caught_up:
            records.append(R.broker_registration_change_record(broker_id, fenced=False))
            records += self._elect_where_leaderless(image, broker_id)
            return HeartbeatAnswer(NONE, True, False, False), records
        return HeartbeatAnswer(NONE, caught_up, broker.fenced, False), records

    def next_session_expiry_ms(self, image: MetadataImage) -> int | None:
        """When the first unfenced broker's session runs out (check_sessions then
        fences it), or None if no session is running."""
        ends = [self.last_contact_ms[b] + self.session_timeout_ms + 1
                for b, broker in image.brokers.items()
                if not broker.fenced and b in self.last_contact_ms]
        return min(ends) if ends else None

    def check_sessions(self, image: MetadataImage, now_ms: int) -> list[R.MetadataRecord]:
        """Fence every unfenced broker whose session ran out."""
        records: list[R.MetadataRecord] = []
        for broker_id, broker in image.brokers.items():
            if broker.fenced:
                continue
            last = self.last_contact_ms.get(broker_id)
            if last is None:
                self._touch(broker_id, now_ms)
                continue
            if now_ms - last > self.session_timeout_ms:
                mine = [R.broker_registration_change_record(broker_id, fenced=True)]
                mine = self.with_elr(image, mine + self._leave(image, broker_id))
                records += mine
                # the next broker's changes start from these
                image = apply(image, mine, image.offset)
        return records

    # -- ISR changes -------------------------------------------------------------------

    def alter_partition(
        self,
        image: MetadataImage,
        broker_id: int,
        topic_id_text: str,
        partition: int,
        leader_epoch: int,
        partition_epoch: int,
        new_isr: list[int],
    ) -> tuple[AlterPartitionAnswer, list[R.MetadataRecord]]:
        import uuid

        topic = image.topics_by_id.get(uuid.UUID(topic_id_text))
        if topic is None:
            return AlterPartitionAnswer(UNKNOWN_TOPIC_ID), []
        part = topic.partitions.get(partition)
        if part is None:
            return AlterPartitionAnswer(UNKNOWN_TOPIC_OR_PARTITION), []
        if part.leader != broker_id:
            return AlterPartitionAnswer(NOT_LEADER_OR_FOLLOWER), []
        if leader_epoch != part.leader_epoch:
            return AlterPartitionAnswer(FENCED_LEADER_EPOCH), []
        if partition_epoch != part.partition_epoch:
            return AlterPartitionAnswer(INVALID_UPDATE_VERSION), []
        if broker_id not in new_isr or any(r not in part.replicas for r in new_isr) or len(
            set(new_isr)
        ) != len(new_isr):
            return AlterPartitionAnswer(INVALID_REQUEST), []
        for r in new_isr:
            if r not in part.isr and not _eligible(image, r, part):
                return AlterPartitionAnswer(INELIGIBLE_REPLICA), []
        isr = tuple(r for r in part.replicas if r in new_isr)
        if isr == part.isr:
            return AlterPartitionAnswer(NONE, part.leader, part.leader_epoch, isr,
                                        part.partition_epoch), []
        if part.reassigning:
            # The ISR may now hold the whole target: then this change completes
            # the reassignment (reassignment.py).
            sets = reassignment.ReplicaSets(
                part.replicas, isr, part.adding_replicas, part.removing_replicas)
            record = reassignment.change_record(image, str(topic.topic_id), part, sets)
        else:
            record = R.partition_change_record(str(topic.topic_id), partition, isr=list(isr))
        assert record is not None
        [record] = self.with_elr(image, [record])
        after = apply(image, [record], image.offset).topics_by_id[topic.topic_id]
        now = after.partitions[partition]
        return AlterPartitionAnswer(
            NONE, now.leader, now.leader_epoch, now.isr, now.partition_epoch), [record]

    # -- log dirs (KIP-858) --------------------------------------------------------------

    def assign_replicas_to_dirs(
        self,
        image: MetadataImage,
        broker_id: int,
        broker_epoch: int | None,
        assignments: list[tuple[str, int, str]],
    ) -> tuple[int, dict[tuple[str, int], int], list[R.MetadataRecord]]:
        """AssignReplicasToDirs: `broker_id` placed its replicas (topic id text,
        partition) in these dirs. Each change is a PartitionChangeRecord with
        the directories; then leadership follows the dirs (`directory_changes`).
        `broker_epoch` None: the controller's own broker (a combined node).
        Returns (error code, code per partition, records)."""
        import uuid

        broker = image.brokers.get(broker_id)
        if broker is None:
            return BROKER_ID_NOT_REGISTERED, {}, []
        if broker_epoch is not None and broker_epoch != broker.epoch:
            return STALE_BROKER_EPOCH, {}, []
        results: dict[tuple[str, int], int] = {}
        records: list[R.MetadataRecord] = []
        for tid_text, index, directory in assignments:
            topic = image.topics_by_id.get(uuid.UUID(tid_text))
            part = topic.partitions.get(index) if topic is not None else None
            if topic is None:
                results[(tid_text, index)] = UNKNOWN_TOPIC_ID
            elif part is None:
                results[(tid_text, index)] = UNKNOWN_TOPIC_OR_PARTITION
            elif broker_id not in part.replicas:
                results[(tid_text, index)] = NOT_LEADER_OR_FOLLOWER
            else:
                results[(tid_text, index)] = NONE
                if D.directory_of(part, broker_id) != directory:
                    records.append(R.partition_change_record(
                        tid_text, index,
                        directories=D.with_directory(part, broker_id, directory)))
        after = apply(image, records, image.offset)
        return NONE, results, self.with_elr(
            image, records + self.directory_changes(after, broker_id))

    def directory_changes(self, image: MetadataImage, broker_id: int) -> list[R.MetadataRecord]:
        """Leadership follows `broker_id`'s log dirs: its replicas whose dir is
        not online leave leadership and the ISR as a fenced broker's do (the last
        ISR member stays, without leading); a leaderless partition whose ISR holds
        it on an online dir gets it as leader."""
        if not _eligible(image, broker_id):
            return []
        records = self.with_elr(image, self._leave(
            image, broker_id, only=lambda part: not D.replica_dir_online(image, part, broker_id)
        ))
        after = apply(image, records, image.offset)
        return self.with_elr(image, records + self._elect_where_leaderless(after, broker_id))

    def log_dirs_offline(
        self, image: MetadataImage, broker_id: int, offline_log_dirs: tuple[str, ...]
    ) -> list[R.MetadataRecord]:
        """`broker_id`'s log dirs `offline_log_dirs` failed while it ran
        (BrokerHeartbeat `offline_log_dirs`; on a combined node, its own code).
        As Kafka's `handleDirectoriesOffline`: a BrokerRegistrationChangeRecord
        names the registered dirs still online, then its replicas in the failed
        dirs leave leadership and the ISR (`directory_changes`). A dir already
        out of the registration changes nothing, so the same list may come in
        every heartbeat. With no registered dir left the broker is fenced (a
        Kafka broker halts then; an empty list would read as every dir online)."""
        broker = image.brokers.get(broker_id)
        if broker is None or not set(offline_log_dirs) & set(broker.log_dirs):
            return []
        if _no_dir_online(broker.log_dirs, offline_log_dirs):
            if broker.fenced:
                return []
            return self.with_elr(
                image, [R.broker_registration_change_record(broker_id, fenced=True)]
                + self._leave(image, broker_id))
        online = [d for d in broker.log_dirs if d not in offline_log_dirs]
        records = [R.broker_registration_change_record(broker_id, log_dirs=online)]
        after = apply(image, records, image.offset)
        return self.with_elr(image, records + self.directory_changes(after, broker_id))

    # -- elections -----------------------------------------------------------------------

    def _leave(
        self, image: MetadataImage, broker_id: int,
        only: Callable[[PartitionImage], bool] | None = None,
    ) -> list[R.MetadataRecord]:
        """Move leadership and ISR membership away from `broker_id` (fenced or
        shutting down), or only from its replicas that `only` picks."""
        records: list[R.MetadataRecord] = []
        for topic, part in _partitions_with(image, broker_id):
            if only is not None and not only(part):
                continue
            tid = str(topic.topic_id)
            if part.leader == broker_id:
                candidates = [
                    r for r in part.isr if r != broker_id and _eligible(image, r, part)
                ]
                if candidates:
                    isr = [r for r in part.isr if r != broker_id]
                    records.append(R.partition_change_record(
                        tid, part.partition, leader=_in_replica_order(part, candidates)[0],
                        isr=isr, leader_epoch=part.leader_epoch + 1,
                    ))
                    continue
                rest = tuple(r for r in part.isr if r != broker_id)
                # KIP-966: with the ISR gone, an eligible leader replica leads
                leader, _ = ELR.elect(
                    image, part, _alive(image, part, broker_id), rest)
                if leader != NO_LEADER:
                    records.append(R.partition_change_record(
                        tid, part.partition, leader=leader, isr=[leader],
                        leader_epoch=part.leader_epoch + 1,
                    ))
                    continue
                if self.unclean_leader_election(image, topic.name):
                    live = [r for r in part.replicas
                            if r != broker_id and _eligible(image, r, part)]
                    if live:
                        records.append(R.partition_change_record(
                            tid, part.partition, leader=live[0], isr=[live[0]],
                            leader_epoch=part.leader_epoch + 1,
                        ))
                        continue
                # No one else may lead: no leader, the ISR keeps its last member
                # (with eligible leader replicas it empties: the ELR keeps it).
                isr = list(rest) if ELR.enabled(image) else (list(rest) or [broker_id])
                records.append(R.partition_change_record(
                    tid, part.partition, leader=NO_LEADER, isr=isr,
                    leader_epoch=part.leader_epoch + 1,
                ))
            elif broker_id in part.isr and (len(part.isr) > 1 or ELR.enabled(image)):
                records.append(R.partition_change_record(
                    tid, part.partition, isr=[r for r in part.isr if r != broker_id]
                ))
        return records

    def _elect_where_leaderless(
        self, image: MetadataImage, broker_id: int
    ) -> list[R.MetadataRecord]:
        """`broker_id` is back: lead the partitions that have no leader and hold
        it in their ISR (or, with unclean election, among their replicas)."""
        records: list[R.MetadataRecord] = []
        for topic, part in _partitions_with(image, broker_id):
            if part.leader != NO_LEADER or not D.replica_dir_online(image, part, broker_id):
                continue
            if broker_id in part.isr:
                records.append(R.partition_change_record(
                    str(topic.topic_id), part.partition, leader=broker_id,
                    leader_epoch=part.leader_epoch + 1,
                ))
            elif ELR.elect(image, part, lambda r: r == broker_id, part.isr)[0] == broker_id:
                # an eligible leader replica, or the last known leader (KIP-966)
                records.append(R.partition_change_record(
                    str(topic.topic_id), part.partition, leader=broker_id, isr=[broker_id],
                    leader_epoch=part.leader_epoch + 1,
                ))
            elif self.unclean_leader_election(image, topic.name):
                records.append(R.partition_change_record(
                    str(topic.topic_id), part.partition, leader=broker_id, isr=[broker_id],
                    leader_epoch=part.leader_epoch + 1,
                ))
        return records

    def preferred_leader_elections(
        self, image: MetadataImage, only_imbalanced: bool = True
    ) -> list[R.MetadataRecord]:
        """Give leadership back to each partition's first replica when it is a
        live ISR member (ElectLeaders PREFERRED; auto.leader.rebalance.enable)."""
        candidates: dict[int, list[tuple[TopicImage, PartitionImage]]] = {}
        preferred_count: dict[int, int] = {}
        for topic in image.topics_by_name.values():
            for part in topic.partitions.values():
                if not part.replicas:
                    continue
                preferred = part.replicas[0]
                preferred_count[preferred] = preferred_count.get(preferred, 0) + 1
                if part.leader != preferred and preferred in part.isr and _eligible(
                    image, preferred, part
                ):
                    candidates.setdefault(preferred, []).append((topic, part))
        records: list[R.MetadataRecord] = []
        for broker_id, parts in sorted(candidates.items()):
            ratio_pct = 100 * len(parts) / max(preferred_count.get(broker_id, 1), 1)
            if only_imbalanced and ratio_pct <= self.imbalance_percentage:
                continue
            for topic, part in parts:
                records.append(R.partition_change_record(
                    str(topic.topic_id), part.partition, leader=part.replicas[0],
                    leader_epoch=part.leader_epoch + 1,
                ))
        return self.with_elr(image, records)


    def elect_leaders(
        self,
        image: MetadataImage,
        election_type: int,
        partitions: list[tuple[str, int]] | None,
    ) -> tuple[dict[tuple[str, int], tuple[int, str | None]], list[R.MetadataRecord]]:
        """ElectLeaders (KIP-460): PREFERRED gives leadership to the first
        replica if it is a live ISR member; UNCLEAN gives a leaderless partition
        a leader from its live replicas (the ISR first). With no partitions
        named, every partition is tried and only the elected ones answered."""
        named = partitions is not None
        if partitions is None:
            partitions = [(t.name, p) for t in image.topics_by_name.values()
                          for p in t.partitions]
        results: dict[tuple[str, int], tuple[int, str | None]] = {}
        records: list[R.MetadataRecord] = []
        for topic_name, index in partitions:
            topic = image.topics_by_name.get(topic_name)
            part = topic.partitions.get(index) if topic is not None else None
            if topic is None or part is None:
                results[(topic_name, index)] = (UNKNOWN_TOPIC_OR_PARTITION, None)
                continue
            tid = str(topic.topic_id)
            if election_type == ELECTION_PREFERRED:
                preferred = part.replicas[0]
                if part.leader == preferred:
                    results[(topic_name, index)] = (ELECTION_NOT_NEEDED, None)
                elif preferred not in part.isr or not _eligible(image, preferred, part):
                    results[(topic_name, index)] = (
                        PREFERRED_LEADER_NOT_AVAILABLE,
                        (f"Failed to elect leader for partition {topic_name}-{index} under "
                         "strategy PreferredReplicaPartitionLeaderElectionStrategy"),
                    )
                else:
                    results[(topic_name, index)] = (NONE, None)
                    records.append(R.partition_change_record(
                        tid, index, leader=preferred, leader_epoch=part.leader_epoch + 1))
            elif election_type == ELECTION_UNCLEAN:
                if part.leader != NO_LEADER and _eligible(image, part.leader, part):
                    results[(topic_name, index)] = (ELECTION_NOT_NEEDED, None)
                    continue
                live_isr = [r for r in part.isr if _eligible(image, r, part)]
                live = [r for r in part.replicas if _eligible(image, r, part)]
                # KIP-966: with the ISR empty, an eligible leader replica first
                from_elr, _ = ELR.elect(image, part, _alive(image, part),
                                        part.isr)
                if live_isr or live:
                    leader = (_in_replica_order(part, live_isr)[0] if live_isr
                              else from_elr if from_elr != NO_LEADER else live[0])
                    results[(topic_name, index)] = (NONE, None)
                    records.append(R.partition_change_record(
                        tid, index, leader=leader, leader_epoch=part.leader_epoch + 1,
                        isr=None if live_isr else [leader]))
                else:
                    results[(topic_name, index)] = (ELIGIBLE_LEADERS_NOT_AVAILABLE, None)
            else:
                results[(topic_name, index)] = (INVALID_REQUEST,
                                                f"Unknown election type {election_type}")
        if not named:
            results = {k: v for k, v in results.items() if v[0] == NONE}
        return results, self.with_elr(image, records)


def _eligible(
    image: MetadataImage, broker_id: int, part: PartitionImage | None = None
) -> bool:
    """The broker is alive and, given a partition, its replica's log dir is online."""
    b = image.brokers.get(broker_id)
    if b is None or b.fenced or b.in_controlled_shutdown:
        return False
    return part is None or D.replica_dir_online(image, part, broker_id)


def _no_dir_online(registered: tuple[str, ...], offline: tuple[str, ...]) -> bool:
    """Every dir the broker registered has failed (a broker that registered
    none, recorded before KIP-858, is never taken for one)."""
    return bool(registered) and set(registered) <= set(offline)


def _in_replica_order(part: PartitionImage, members: list[int]) -> list[int]:
    return [r for r in part.replicas if r in members]


def _leads_anything(image: MetadataImage, broker_id: int) -> bool:
    return any(
        p.leader == broker_id for t in image.topics_by_name.values() for p in t.partitions.values()
    )


def _partitions_with(
    image: MetadataImage, broker_id: int
) -> list[tuple[TopicImage, PartitionImage]]:
    return [
        (t, p)
        for t in image.topics_by_name.values()
        for p in t.partitions.values()
        if broker_id in p.replicas
    ]


def _alive(image: MetadataImage, part: PartitionImage,
           leaving: int = NO_LEADER) -> Callable[[int], bool]:
    """Whether a replica of `part` may lead, `leaving` (a broker on its way
    out, not yet fenced in `image`) aside."""
    return lambda r: r != leaving and _eligible(image, r, part)
