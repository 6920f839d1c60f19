"""The metadata quorum of a controller: the asyncio shell around the Raft core.

Size (about 620 lines): one shell for one core (time, messages, files). The
KIP-853 voter changes (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter) are
the seam to move out next.

Theory of operation
-------------------
`RaftMetadataQuorum` is `MetadataQuorum` (same log, image and listeners) whose
commits go through `raft/core.py`. The core decides; this shell only moves
time, bytes and files:

* **Time.** One task ticks the core at the deadline it asks for
  (`next_deadline_ms`), woken early whenever a call may have moved it. The
  clock is `time.monotonic()` in ms: the core keeps no time across restarts.
* **Messages out.** Every `Send` of a request goes to its voter over Kafka's
  wire (`raft_wire.py`): one `KafkaChannel` for Fetch and one for the other
  RPCs per voter, on the address in `controller.quorum.voters`, so a
  long-polling Fetch never holds up a Vote. The answer is fed back to the
  core; a failed call is dropped (the core asks again on its own timers). At
  most `MAX_QUEUED_PER_CHANNEL` calls wait per channel; past that a message is
  dropped like a lost packet.
* **Messages in.** Vote, BeginQuorumEpoch, EndQuorumEpoch and a voter's Fetch
  and FetchSnapshot reach `handle_request` (the controller's request handlers); the core's
  answer is the `Send` that carries the request's correlation id back to its
  sender. A parked Fetch is answered when the core completes it.
* **Election state** (`PersistElectionState`) is written to
  ``__cluster_metadata-0/quorum-state`` (Kafka's JSON, fsynced) before any
  effect after it runs, so a vote is durable before it is sent.
* **Commit.** On `HighWatermarkAdvanced` the batches below the high watermark
  are applied to the image, in order, and published to the listeners. The log
  may hold more (uncommitted, possibly truncated later): the image never does.
* **Snapshots.** When one is due (`quorum.py`) the image at the applied end
  is written through `core.create_snapshot`, which checks its id; a follower
  whose fetch offset fell below the leader's log start gets the leader's
  snapshot in FetchSnapshot chunks, and `SnapshotInstalled` makes it the image.
  At start-up the image is the newest snapshot's.
* **Leadership.** This node is the *active controller* once it leads and its
  high watermark has passed the LeaderChange entry of its epoch (then its image
  holds everything committed before). `leadership_listeners` hear True then,
  and False when it stops leading; commits waiting then fail with
  `NotControllerError` so callers retry against the new leader.

`commit(records)` proposes one batch on the active controller and returns once
the high watermark has passed it.

**One voter** (a single node, `controller.quorum.voters` empty or naming only
this node) runs the same code: the core elects it in `start` (a new epoch and
its LeaderChange entry, committed at once since the voter is its own
majority), so the node is the active controller when `start` returns, and a
proposal is committed inside `propose` (flushed, then the high watermark
moves). `append` is that, synchronous. At load, everything in a lone voter's
log is committed (no other node can lead and truncate it), so the image
replays the whole log, as a metadata log written before this class ran single
nodes (no quorum-state, epoch 0, no LeaderChange entries) is read.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..protocol import api
from ..protocol import records as batches
from ..protocol.client import ChannelError, KafkaChannel, SaslLogin, stop_tasks
from ..raft import messages as M
from ..raft.config import (
    ELECTION_BACKOFF_MAX_MS,
    ELECTION_TIMEOUT_MS,
    FETCH_TIMEOUT_MS,
    REQUEST_TIMEOUT_MS,
    RaftConfig,
    VoterAddress,
    VoterSet,
)
from ..raft.core import InvalidSnapshotId, RaftCore
from ..raft.effects import (
    Effect,
    HighWatermarkAdvanced,
    LeaderChanged,
    PersistElectionState,
    Send,
    SnapshotInstalled,
)
from ..raft.log import OffsetAndEpoch
from ..raft.state import NO_ID, State, read_quorum_state, write_quorum_state
from ..raft.voters import KRAFT_VERSION, KRAFT_VOTERS, encode_kraft_version, encode_voters
from . import image as img
from . import quorum_status, raft_wire
from . import records as R
from .quorum import (
    METADATA_TOPIC,
    READ_CHUNK_BYTES,
    MetadataLogSettings,
    MetadataQuorum,
    decode_batch,
)
from .snapshots import decode as decode_snapshot

log = logging.getLogger(__name__)

MAX_QUEUED_PER_CHANNEL = 8  # calls waiting on one voter channel; more are dropped
MAX_PENDING_ANSWERS = 64  # incoming requests waiting for the core's answer
ANSWER_MARGIN_MS = 1000  # beyond the request's own wait, before answering an error
MAX_TICK_WAIT_MS = 1000  # the ticker looks again at least this often
RESIGN_WAIT_S = 0.5  # at stop, how long EndQuorumEpoch may take to go out
NOT_LEADER_OR_FOLLOWER = 6

LeadershipListener = Callable[[bool], None]


class NotControllerError(Exception):
    """This node is not the active controller (anymore): try the leader."""

    def __init__(self, leader_id: int) -> None:
        super().__init__(f"not the active controller; the quorum leader is {leader_id}")
        self.leader_id = leader_id


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def raft_config(config: Any) -> RaftConfig | None:
    """The Raft configuration of a controller (`BrokerConfig`'s
    controller.quorum.* keys); None for a broker-only node (an observer).
    No voters configured: this node is the one voter (it never dials itself,
    so its address is not needed)."""
    if "controller" not in config.process_roles:
        return None
    voters = config.quorum_voters
    addresses = {v.node_id: VoterAddress(v.node_id, v.host, v.port) for v in voters}
    bootstrap = config.quorum_bootstrap_servers
    kraft_version = 0
    if not addresses and bootstrap:
        # KIP-853: the voters are in the metadata log (the bootstrap snapshot
        # `storage format --standalone/--initial-controllers` wrote, then
        # VotersRecords); with none there this node is an observer.
        kraft_version = 1
    elif not addresses:
        addresses = {config.node_id: VoterAddress(config.node_id, "127.0.0.1", 0)}
    return RaftConfig(
        voters=VoterSet(frozenset(addresses), addresses),
        kraft_version=kraft_version,
        directory_id=_directory_id(config.metadata_log_dir),
        local_address=_local_address(config) if kraft_version else None,
        bootstrap_ids=tuple(-1 - i for i in range(len(bootstrap))) if kraft_version else (),
        election_timeout_ms=config.get(ELECTION_TIMEOUT_MS),
        fetch_timeout_ms=config.get(FETCH_TIMEOUT_MS),
        election_backoff_max_ms=config.get(ELECTION_BACKOFF_MAX_MS),
        request_timeout_ms=config.get(REQUEST_TIMEOUT_MS),
    )


def controller_endpoint(config: Any) -> VoterAddress:
    """This controller's endpoint for the VotersRecord: its first controller
    listener (advertised if `advertised.listeners` names it). Raises ValueError."""
    names = sorted(config.controller_listener_names)
    if not names:
        raise ValueError("controller.listener.names is not set")
    for endpoints in (config._advertised_endpoints(), config.listeners):
        for e in endpoints:
            if e.name == names[0]:
                return VoterAddress(config.node_id, e.host or "localhost", e.port, e.name)
    raise ValueError(f"no listener named {names[0]} (controller.listener.names)")


def _local_address(config: Any) -> VoterAddress | None:
    try:
        address = controller_endpoint(config)
    except ValueError:
        return None
    return address if address.port > 0 else None


def _directory_id(metadata_dir: Path) -> str:
    """The metadata log dir's ``directory.id`` (meta.properties), "" if none."""
    try:
        text = (metadata_dir / "meta.properties").read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "directory.id":
            return value.strip()
    return ""


class RaftMetadataQuorum(MetadataQuorum):
    def __init__(
        self,
        metadata_dir: Path,
        node_id: int,
        config: RaftConfig,
        cluster_id: str,
        settings: MetadataLogSettings | None = None,
        channel_ssl: ssl.SSLContext | None = None,
        sasl: SaslLogin | None = None,  # logging in to the other voters
    ) -> None:
        super().__init__(metadata_dir, node_id, settings)
        self.channel_ssl = channel_ssl  # TLS to the other voters (controller listener)
        self.sasl = sasl
        assert node_id in config.voters or config.kraft_version >= 1, (
            "with a static quorum only a voter runs the Raft quorum")
        self.config = config
        self.dynamic = config.kraft_version >= 1  # KIP-853: voters in the log
        self.bootstrap_servers: list[tuple[str, int]] = []  # by -1 - index
        self.cluster_id = cluster_id
        self.core: RaftCore | None = None
        self.observers = quorum_status.ObserverTable()  # DescribeQuorum's observers
        self.leadership_listeners: list[LeadershipListener] = []
        self.active = False
        self._applied_end = 0  # next offset to apply to the image
        self._commit_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._answers: dict[tuple[int, int], asyncio.Future[M.Response]] = {}
        self._next_incoming_id = 0
        self._channels: dict[tuple[int, bool], KafkaChannel] = {}
        self._queued: dict[tuple[int, bool], int] = {}
        self._calls: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._ticker: asyncio.Task[None] | None = None
        # the leader's endpoint as the last response that named it said
        self._leader_address: tuple[int, tuple[str, int]] | None = None

    # -- lifecycle -------------------------------------------------------------------

    @property
    def _state_dir(self) -> Path:
        return self.metadata_dir / f"{METADATA_TOPIC}-0"

    def load(self) -> img.MetadataImage:
        """Open the log; the image starts from the newest snapshot (committed)
        and follows the high watermark (what the log holds past it may not be
        committed)."""
        if not self.dynamic and self.single_voter:
            super().load()  # the whole log is committed: replayed into the image
            assert self._log is not None and self._raft_log is not None
            self._applied_end = self._log.log_end_offset
        else:
            plog, _, snapshot_id, image = self._open_log()
            assert self._raft_log is not None
            self.image = image
            self._applied_end = (
                plog.log_start_offset if snapshot_id is None else snapshot_id.offset
            )
            plog.high_watermark = self._applied_end
        election = read_quorum_state(self._state_dir)
        self.core = RaftCore(self.node_id, self.config, self._raft_log, election, random.Random())
        return self.image

    @property
    def voters(self) -> VoterSet:
        """The voter set in force (KIP-853: the latest in the log)."""
        return self.core.voters if self.core is not None else self.config.voters

    @property
    def single_voter(self) -> bool:
        return self.voters.ids == {self.node_id}

    def start(self) -> None:
        """Start the core (a lone voter leads, and is the active controller,
        when this returns) and the task that ticks it."""
        assert self.core is not None, "load() first"
        self._run(self.core.start(_now_ms()))
        assert self.active or not self.single_voter, "a lone voter leads at once"
        self._ticker = asyncio.get_running_loop().create_task(self._tick_loop())

    async def stop(self) -> None:
        """Resign if leading (EndQuorumEpoch, so the others elect at once), then stop."""
        await stop_tasks([self._ticker])  # no new election from here on
        self._ticker = None
        if self.core is not None and self.core.state == State.LEADER:
            self._run(self.core.resign(_now_ms()))
            if self._calls:
                await asyncio.wait(list(self._calls), timeout=RESIGN_WAIT_S)
        await stop_tasks(list(self._calls))
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        self._fail_waiters()

    # -- what callers see ------------------------------------------------------------------

    @property
    def leader_id(self) -> int:
        return self.core.leader_id if self.core is not None else NO_ID

    @property
    def epoch(self) -> int:
        return self.core.epoch if self.core is not None else 0

    def observer_fetched(self, replica_id: int, fetch_offset: int) -> None:
        """A broker-only node fetched the metadata log from this leader."""
        core = self.core
        if core is None or core.leader is None or replica_id < 0:
            return
        if replica_id in self.voters:
            return
        self.observers.fetched(
            core.epoch, replica_id, fetch_offset, self.log_end_offset, _now_ms()
        )

    def describe_quorum(self) -> quorum_status.QuorumStatus | None:
        """DescribeQuorum's answer, or None when this node does not lead."""
        core = self.core
        if core is None or core.leader is None or core.state != State.LEADER:
            return None
        now_ms = _now_ms()
        return quorum_status.describe(
            core.leader, self.voters.ids, self.log_end_offset, self.observers, now_ms,
            wall_offset_ms=int(time.time() * 1000) - now_ms,
            raft_observers=core.leader.observers,
        )

    def append(self, records: list[R.MetadataRecord]) -> img.MetadataImage:
        """Commit one batch synchronously: a lone voter commits inside
        `propose`. Several voters: only `commit`."""
        core = self.core
        if not self.single_voter or core is None or not self.active:
            raise NotControllerError(self.leader_id)
        if not records:
            return self.image
        last_offset, effects = core.propose([R.encode(r) for r in records], _now_ms())
        self._run(effects)
        assert self._applied_end > last_offset, (self._applied_end, last_offset)
        return self.image

    def replicate(self, data: bytes) -> int:
        raise AssertionError("a voter replicates through the Raft core, not as an observer")

    async def commit(self, records: list[R.MetadataRecord]) -> img.MetadataImage:
        """Propose one batch as the active controller; return the image once the
        high watermark has passed it."""
        if not records:
            return self.image
        core = self.core
        if core is None or not self.active:
            raise NotControllerError(self.leader_id)
        last_offset, effects = core.propose([R.encode(r) for r in records], _now_ms())
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._commit_waiters.append((last_offset, done))
        self._run(effects)
        await done
        return self.image

    async def change_voters(
        self, change: Callable[[RaftCore, int], tuple[int, list[Effect]]], timeout_s: float
    ) -> None:
        """AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter on the leader:
        `change` appends the VotersRecord (or raises VoterChangeError); return
        once it is committed (TimeoutError after `timeout_s`)."""
        core = self.core
        if core is None or not self.active:
            raise NotControllerError(self.leader_id)
        offset, effects = change(core, _now_ms())
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if offset < self._applied_end:
            done.set_result(None)
        else:
            self._commit_waiters.append((offset, done))
        self._run(effects)
        await asyncio.wait_for(asyncio.shield(done), timeout_s)

    # -- requests from the other voters ----------------------------------------------------

    async def handle_request(self, api_key: int, request: Any) -> dict[str, Any]:
        """Vote / BeginQuorumEpoch / EndQuorumEpoch / a voter's Fetch or
        FetchSnapshot: the core's answer."""
        src, body = raft_wire.request_from_wire(api_key, request)
        core = self.core
        if core is None or len(self._answers) >= MAX_PENDING_ANSWERS:
            refused = self._error_answer(body)
            return raft_wire.response_to_wire(refused, self._endpoint_of(refused.leader_id))
        self._next_incoming_id = (self._next_incoming_id + 1) & 0x7FFFFFFF
        key = (src, self._next_incoming_id)
        answer: asyncio.Future[M.Response] = asyncio.get_running_loop().create_future()
        self._answers[key] = answer
        wait_ms = self.config.request_timeout_ms + ANSWER_MARGIN_MS
        if isinstance(body, M.FetchRequest):
            wait_ms += body.max_wait_ms
        try:
            self._run(core.handle(M.Envelope(src, self.node_id, key[1], body), _now_ms()))
            response = await asyncio.wait_for(answer, wait_ms / 1000)
        except TimeoutError:
            response = self._error_answer(body)
        finally:
            self._answers.pop(key, None)
        return raft_wire.response_to_wire(response, self._endpoint_of(response.leader_id))

    def _endpoint_of(self, node_id: int) -> VoterAddress | None:
        """Where `node_id` (a leader a response names) listens, if known."""
        if node_id == self.node_id and self.config.local_address is not None:
            return self.config.local_address
        address = self.voters.addresses.get(node_id) or self.config.voters.addresses.get(node_id)
        return address if address is not None and address.port > 0 else None

    def _error_answer(self, body: M.Request) -> M.Response:
        code, leader, epoch = NOT_LEADER_OR_FOLLOWER, self.leader_id, self.epoch
        if isinstance(body, M.FetchRequest):
            return M.FetchResponse(code, leader, epoch)
        if isinstance(body, M.VoteRequest):
            return M.VoteResponse(code, leader, epoch, False, body.pre_vote)
        if isinstance(body, M.BeginQuorumEpochRequest):
            return M.BeginQuorumEpochResponse(code, leader, epoch)
        if isinstance(body, M.FetchSnapshotRequest):
            return M.FetchSnapshotResponse(code, leader, epoch)
        return M.EndQuorumEpochResponse(code, leader, epoch)

    # -- effects -------------------------------------------------------------------------------

    def _run(self, effects: list[Effect]) -> None:
        """Run the core's effects in order (each finished before the next)."""
        core = self.core
        assert core is not None
        for effect in effects:
            if isinstance(effect, Send):
                envelope = effect.envelope
                if envelope.is_request:
                    self._send(envelope)
                else:
                    answer = self._answers.get((envelope.dst, envelope.correlation_id))
                    if answer is not None and not answer.done():
                        assert not isinstance(envelope.body, M.REQUEST_TYPES)
                        answer.set_result(envelope.body)  # type: ignore[arg-type]
            elif isinstance(effect, PersistElectionState):
                write_quorum_state(self._state_dir, effect.state, sorted(self.voters.ids))
            elif isinstance(effect, HighWatermarkAdvanced):
                self._apply_committed(effect.high_watermark)
            elif isinstance(effect, LeaderChanged):
                log.info(
                    "metadata quorum: epoch %d, leader %d%s",
                    effect.epoch,
                    effect.leader_id,
                    " (this node)" if effect.leader_id == self.node_id else "",
                )
            elif isinstance(effect, SnapshotInstalled):
                self._on_snapshot_installed(effect.snapshot_id)
            else:
                raise TypeError(f"unknown effect {effect}")
        self._update_leadership()
        self._wake.set()

    def _update_leadership(self) -> None:
        core = self.core
        assert core is not None
        leading = core.state == State.LEADER
        ready = (
            leading
            and core.leader is not None
            and self._applied_end > core.leader.epoch_start_offset
        )
        if ready and not self.active:
            self.active = True
            log.info(
                "active controller from epoch %d (image at offset %d)",
                core.epoch,
                self.image.offset,
            )
            for listener in self.leadership_listeners:
                listener(True)
        elif not leading and self.active:
            self.active = False
            log.info(
                "no longer the active controller (epoch %d, leader %d)", core.epoch, core.leader_id
            )
            self._fail_waiters()
            for listener in self.leadership_listeners:
                listener(False)

    def _on_snapshot_installed(self, snapshot_id: OffsetAndEpoch) -> None:
        """The core replaced the log by the leader's snapshot: the image is the
        snapshot's now (its records are all committed)."""
        data = self.read_snapshot(snapshot_id)
        assert data is not None and self._log is not None, snapshot_id
        self._applied_end = snapshot_id.offset
        self._log.high_watermark = snapshot_id.offset
        self._replace_image(snapshot_id, decode_snapshot(data))

    def _store_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> bool:
        """Through the core, which checks the id against its high watermark and log."""
        assert self.core is not None
        try:
            self.core.create_snapshot(snapshot_id, data)
        except InvalidSnapshotId as e:
            log.warning("metadata snapshot not written: %s", e)
            return False
        return True

    def _fail_waiters(self) -> None:
        waiters, self._commit_waiters = self._commit_waiters, []
        for _, done in waiters:
            if not done.done():
                done.set_exception(NotControllerError(self.leader_id))

    def _apply_committed(self, high_watermark: int) -> None:
        """Apply every batch below the high watermark to the image, in order."""
        plog = self._log
        assert plog is not None
        plog.high_watermark = max(high_watermark, self._applied_end)
        applied_bytes = 0
        while self._applied_end < high_watermark:
            data = plog.read(self._applied_end, READ_CHUNK_BYTES, high_watermark, True).records
            if not data:
                break
            for header in batches.iter_batch_headers(data):
                records = decode_batch(data, header)
                if records:
                    old = self.image
                    self.image = img.apply(old, records, header.last_offset)
                    for listener in self.listeners:
                        listener(old, self.image, records)
                self._applied_end = header.next_offset
                applied_bytes += header.size
        assert self._applied_end >= high_watermark, (self._applied_end, high_watermark)
        if applied_bytes:
            self._committed(applied_bytes, self._applied_end)
        still = []
        for offset, done in self._commit_waiters:
            if offset < self._applied_end:
                if not done.done():
                    done.set_result(None)
            else:
                still.append((offset, done))
        self._commit_waiters = still

    # -- the wire ----------------------------------------------------------------------------------

    def _send(self, envelope: M.Envelope) -> None:
        is_fetch = isinstance(envelope.body, M.FetchRequest | M.FetchSnapshotRequest)
        key = (envelope.dst, is_fetch)
        if self._queued.get(key, 0) >= MAX_QUEUED_PER_CHANNEL:
            return  # as if lost: the core asks again on its timers
        host_port = self._address_of(envelope.dst)
        if host_port is None:
            return  # not known yet: as if lost
        channel = self._channels.get(key)
        if channel is not None and (channel.host, channel.port) != host_port:
            channel.close()  # the voter moved (UpdateRaftVoter) or was a guess
            channel = None
        if channel is None:
            channel = KafkaChannel(host_port[0], host_port[1], b"odradek-raft",
                                   ssl_context=self.channel_ssl, sasl=self.sasl)
            self._channels[key] = channel
        self._queued[key] = self._queued.get(key, 0) + 1
        task = asyncio.get_running_loop().create_task(self._call(channel, key, envelope))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    def _address_of(self, node_id: int) -> tuple[str, int] | None:
        """A voter's address: the voter set's (the log's, KIP-853), a bootstrap
        server for the ids -1, -2, ...; a leader this observer knows only by id
        (its log does not hold the VotersRecord yet) is looked for among the
        bootstrap servers, one at random per call (one that is not the leader
        answers NOT_LEADER and the core asks again)."""
        address = self.voters.addresses.get(node_id) or self.config.voters.addresses.get(node_id)
        if address is not None and address.port > 0:
            return address.host, address.port
        if self._leader_address is not None and self._leader_address[0] == node_id:
            return self._leader_address[1]
        servers = self.bootstrap_servers
        if node_id < 0 and -1 - node_id < len(servers):
            return servers[-1 - node_id]
        if servers:
            return random.choice(servers)
        return None

    def _snapshot_controls(self, end_offset: int) -> list[tuple[int, bytes]]:
        core = self.core
        if core is None or core.voter_history.kraft_version < 1:
            return []
        return [(KRAFT_VERSION, encode_kraft_version(1)),
                (KRAFT_VOTERS, encode_voters(core.voter_history.at(end_offset - 1)))]

    async def _call(
        self, channel: KafkaChannel, key: tuple[int, bool], envelope: M.Envelope
    ) -> None:
        body = envelope.body
        assert isinstance(body, M.REQUEST_TYPES)
        api_key, version, data = raft_wire.request_to_wire(body, self.cluster_id)
        timeout_ms = self.config.request_timeout_ms
        if isinstance(body, M.FetchRequest):
            timeout_ms += body.max_wait_ms
        try:
            response = await channel.request(api_key, version, data, timeout_s=timeout_ms / 1000)
            answer = raft_wire.response_from_wire(body, response)
            learned = raft_wire.leader_endpoints(response).get(answer.leader_id)
            if learned is not None and answer.leader_id >= 0:
                # KIP-853: the leader's endpoint, for an observer that knows it
                # only by id (one entry: the leader of the answer)
                self._leader_address = (answer.leader_id, learned)
        except ChannelError as e:
            log.debug("raft %s to %d failed: %s", api.api_name(api_key), envelope.dst, e)
            return
        finally:
            self._queued[key] -= 1
        core = self.core
        if core is not None:
            reply = M.Envelope(envelope.dst, self.node_id, envelope.correlation_id, answer)
            self._run(core.handle(reply, _now_ms()))

    async def _tick_loop(self) -> None:
        core = self.core
        assert core is not None
        while True:
            wait_ms = core.next_deadline_ms() - _now_ms()
            if wait_ms > 0:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), min(wait_ms, MAX_TICK_WAIT_MS) / 1000)
                except TimeoutError:
                    pass
                continue
            try:
                self._run(core.tick(_now_ms()))
            except Exception:
                log.exception("raft tick failed")
                raise
            # A deadline the tick did not move waits at least a millisecond.
            if core.next_deadline_ms() <= _now_ms():
                await asyncio.sleep(0.001)
