"""A deterministic simulator for the Raft core (Kafka's RaftEventSimulationTest, TigerBeetle's VOPR).

Theory of operation
-------------------
One `Simulation` is one schedule, fully determined by its seed. It builds 3-5
`RaftCore`s over `InMemoryRaftLog`s, a fake clock and an event queue ordered
by (time, sequence number). Each step pops one event and runs it:

* ``deliver`` a message. The network draws every message's delay from the
  seeded RNG (so messages reorder), drops some, duplicates some, and drops
  what crosses a partition (checked when sent and again when delivered). A
  message to a node that crashed after it was sent is dropped (its
  connections died with it).
* ``tick`` a node at the deadline its core asked for (`next_deadline_ms`).
* ``propose``: a client writes an entry to a node that believes it leads.
* ``crash`` a node: its core and state machine go; its disk (the flushed log,
  the snapshot, the persisted quorum-state) stays. Sometimes a crash lands in
  the middle of running a core's effects, after some of them only, which is
  how a vote sent before its persist would show. ``restart`` builds a new
  core from the disk.
* ``partition``/``heal`` the network; ``snapshot``: a node snapshots its state
  machine at its high watermark and drops the log below.

After every step the `Checker` asserts the invariants (see its docstring).
At the end the network heals, every node restarts, and the run must elect a
leader and commit a new entry on every node within a bounded simulated time.

A failing schedule raises `SimulationFailure` carrying its seed and the tail
of its trace; ``ODRADEK_SIM_SEED=<seed>`` replays exactly that schedule.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from typing import cast

from odradek.raft import messages as M
from odradek.raft.config import RaftConfig, VoterSet
from odradek.raft.core import NotLeaderError, RaftCore, VoterChangeError
from odradek.raft.effects import (
    Effect,
    HighWatermarkAdvanced,
    LeaderChanged,
    PersistElectionState,
    Send,
    SnapshotInstalled,
)
from odradek.raft.log import InMemoryRaftLog, OffsetAndEpoch
from odradek.raft.state import ElectionState, State
from odradek.raft.voters import (
    CONTROL_KEY,
    KRAFT_VERSION,
    KRAFT_VOTERS,
    ZERO_UUID,
    split_control_entry,
)
from tests.simulation.scheduling import Scheduler, SimulationFailure

LIVENESS_BOUND_MS = 60_000  # after healing: a leader and a commit within this


@dataclass(slots=True)
class Faults:
    """How hostile one schedule is; drawn from its seed."""

    drop: float
    duplicate: float
    max_delay_ms: int
    slow_delay_ms: int  # a few messages take this long (reordering across rounds)
    crash_every_ms: int  # mean time between crashes, 0 = none
    partition_every_ms: int  # mean time between partitions, 0 = none
    crash_mid_effects: float
    propose_every_ms: int
    snapshot_every_ms: int

    @classmethod
    def draw(cls, rng: random.Random) -> Faults:
        return cls(
            drop=rng.choice([0.0, 0.01, 0.05, 0.15]),
            duplicate=rng.choice([0.0, 0.02, 0.1]),
            max_delay_ms=rng.choice([5, 20, 60]),
            slow_delay_ms=rng.choice([100, 400, 1500]),
            crash_every_ms=rng.choice([0, 300, 800, 3000]),
            partition_every_ms=rng.choice([0, 500, 1000, 4000]),
            crash_mid_effects=rng.choice([0.0, 0.02, 0.1]),
            propose_every_ms=rng.choice([20, 80, 200]),
            snapshot_every_ms=rng.choice([0, 500, 2000]),
        )


def encode_state(entries: list[tuple[int, bytes]]) -> bytes:
    return b"\n".join(b"%d:%s" % (epoch, data.hex().encode()) for epoch, data in entries)


def decode_state(raw: bytes) -> list[tuple[int, bytes]]:
    if not raw:
        return []
    out = []
    for line in raw.split(b"\n"):
        epoch, _, data = line.partition(b":")
        out.append((int(epoch), bytes.fromhex(data.decode())))
    return out


def snapshot_controls(raw: bytes) -> list[tuple[int, bytes]]:
    """The KIP-853 control entries (kraft.version, voters) among a snapshot's
    entries: the in-memory log asks the state machine (`InMemoryRaftLog`)."""
    out = []
    for _, data in decode_state(raw):
        kind, value = split_control_entry(data)
        if data[:2] == CONTROL_KEY.pack(0, 0)[:2] and kind in (KRAFT_VERSION, KRAFT_VOTERS):
            out.append((kind, value))
    return out


@dataclass(slots=True)
class Disk:
    """What survives a crash."""

    log: InMemoryRaftLog = field(default_factory=InMemoryRaftLog)
    election: ElectionState = field(default_factory=ElectionState)


@dataclass(slots=True)
class SimNode:
    node_id: int
    disk: Disk
    core: RaftCore | None = None
    incarnation: int = 0
    tick_at_ms: int = -1
    # The state machine: every committed (epoch, data) from offset 0, in order.
    applied: list[tuple[int, bytes]] = field(default_factory=list)
    last_high_watermark: int = 0

    @property
    def alive(self) -> bool:
        return self.core is not None


class Checker:
    """Invariants, checked after every step.

    * Election safety: at most one leader per epoch, ever.
    * Committed entries are never lost, changed or reordered: every node's
      state machine (what it applied below its high watermark) is a prefix of
      one global committed log, so any two nodes' committed prefixes agree.
    * The high watermark of a node never decreases between its crashes.
    * Leader completeness: a node that becomes leader of epoch E holds every
      entry committed in an epoch before E (in its log or its snapshot).
    """

    def __init__(self) -> None:
        self.committed: list[tuple[int, bytes]] = []
        self.commit_epoch: list[int] = []  # epoch of the node that first saw it committed
        self.leaders: dict[int, int] = {}

    def check_node(self, node: SimNode) -> None:
        core = node.core
        assert core is not None
        hw = core.high_watermark
        if hw < node.last_high_watermark:
            raise SimulationFailure(
                f"node {node.node_id}: high watermark went back {node.last_high_watermark} -> {hw}"
            )
        node.last_high_watermark = hw
        if len(node.applied) != hw:
            raise SimulationFailure(
                f"node {node.node_id}: applied {len(node.applied)} entries, high watermark {hw}"
            )
        if core.state == State.LEADER:
            other = self.leaders.setdefault(core.epoch, node.node_id)
            if other != node.node_id:
                raise SimulationFailure(
                    f"two leaders in epoch {core.epoch}: {other} and {node.node_id}"
                )

    def on_applied(self, node: SimNode, start: int, epoch: int) -> None:
        """`node` applied entries [start, len(applied)); compare with the committed log."""
        for offset in range(start, len(node.applied)):
            entry = node.applied[offset]
            if offset < len(self.committed):
                if self.committed[offset] != entry:
                    raise SimulationFailure(
                        f"node {node.node_id} committed {entry} at {offset}, "
                        f"others committed {self.committed[offset]}"
                    )
            else:
                assert offset == len(self.committed)
                self.committed.append(entry)
                self.commit_epoch.append(epoch)

    def on_leader(self, node: SimNode) -> None:
        core = node.core
        assert core is not None
        log = node.disk.log
        other = self.leaders.setdefault(core.epoch, node.node_id)
        if other != node.node_id:
            raise SimulationFailure(
                f"two leaders in epoch {core.epoch}: {other} and {node.node_id}"
            )
        snapshot_id = log.latest_snapshot_id()
        below: list[tuple[int, bytes]] = []
        if snapshot_id is not None:
            data = log.read_snapshot(snapshot_id)
            assert data is not None
            below = decode_state(data)
        for offset, entry in enumerate(self.committed):
            if self.commit_epoch[offset] >= core.epoch:
                continue
            if offset < log.log_start_offset:
                mine = below[offset] if offset < len(below) else None
            elif offset < log.log_end_offset:
                e = log.entry(offset)
                mine = (e.epoch, e.data)
            else:
                mine = None
            if mine != entry:
                raise SimulationFailure(
                    f"leader {node.node_id} of epoch {core.epoch} lacks committed entry "
                    f"{offset} {entry} (has {mine})"
                )


class Simulation(Scheduler):
    def __init__(
        self, seed: int, steps: int, nodes: int | None = None, membership: bool = False
    ) -> None:
        super().__init__(seed)
        self.steps = steps
        count = nodes if nodes is not None else self.rng.choice([3, 3, 4, 5])
        self.faults = Faults.draw(self.rng)
        fast = self.rng.random() < 0.75  # most schedules run with shorter timeouts
        # KIP-853 schedules: some nodes start as observers, and voters are
        # added and removed (the leader too) while the faults go on.
        self.membership = membership
        first = self.rng.randint(1, count - 1) if membership else count
        all_ids = frozenset(range(1, count + 1))
        voters = VoterSet(frozenset(range(1, first + 1)))
        if fast:
            self.config = RaftConfig(
                voters=voters,
                election_timeout_ms=200,
                fetch_timeout_ms=400,
                election_backoff_max_ms=200,
                request_timeout_ms=300,
                fetch_max_wait_ms=100,
                fetch_max_bytes=self.rng.choice([1, 1, 8, 64, 1 << 20]),
                fetch_snapshot_max_bytes=self.rng.choice([16, 4096]),
                kraft_version=int(membership),
            )
        else:
            self.config = RaftConfig(voters=voters, kraft_version=int(membership))
        self.nodes = {
            i: SimNode(i, Disk(InMemoryRaftLog(snapshot_controls))) for i in sorted(all_ids)
        }
        self.checker = Checker()
        self.blocked: set[tuple[int, int]] = set()
        # (requester, correlation id) -> the requester's incarnation when it sent
        # the request: a reply reaches only that incarnation (its connection).
        self.reply_to: dict[tuple[int, int], int] = {}
        self.proposals = 0
        self.faulty = True
        self.steps_run = 0
        self.stats = {"elections": 0, "crashes": 0, "partitions": 0, "snapshots": 0, "installs": 0,
                      "voter_changes": 0, "leader_removed": 0}


    # -- nodes ----------------------------------------------------------------------------
    def _start(self, node: SimNode) -> None:
        node.incarnation += 1
        node.tick_at_ms = -1
        log = node.disk.log
        log.crash()
        snapshot_id = log.latest_snapshot_id()
        node.applied = []
        if snapshot_id is not None:
            data = log.read_snapshot(snapshot_id)
            assert data is not None
            node.applied = decode_state(data)
        node.last_high_watermark = len(node.applied)
        core_rng = random.Random(self.rng.getrandbits(64))
        node.core = RaftCore(node.node_id, self.config, log, node.disk.election, core_rng)
        self._run_effects(node, node.core.start(self.now_ms))

    def _crash(self, node: SimNode) -> None:
        self.log(f"crash {node.node_id}")
        self.stats["crashes"] += 1
        node.core = None
        node.incarnation += 1

    def _reschedule_tick(self, node: SimNode) -> None:
        if node.core is None:
            return
        due = max(node.core.next_deadline_ms(), self.now_ms + 1)
        if node.tick_at_ms < self.now_ms or due < node.tick_at_ms:
            node.tick_at_ms = due
            self._push(due, "tick", (node.node_id, node.incarnation))

    def _run_effects(self, node: SimNode, effects: list[Effect]) -> None:
        cut = len(effects)
        if self.faulty and effects and self.rng.random() < self.faults.crash_mid_effects:
            # Crash between two effects, most often just before a persist: the
            # window where an answer already sent could outlive what backs it.
            persists = [i for i, e in enumerate(effects) if isinstance(e, PersistElectionState)]
            if persists and self.rng.random() < 0.7:
                cut = self.rng.choice(persists)
            else:
                cut = self.rng.randrange(len(effects))
        for i, effect in enumerate(effects):
            if i == cut:
                self._crash(node)
                self._push(self.now_ms + self._exp(500), "restart", node.node_id)
                return
            if isinstance(effect, Send):
                self._send(effect.envelope)
            elif isinstance(effect, PersistElectionState):
                node.disk.election = effect.state
            elif isinstance(effect, HighWatermarkAdvanced):
                self._apply(node, effect.high_watermark)
            elif isinstance(effect, LeaderChanged):
                self.log(f"node {node.node_id}: epoch {effect.epoch} leader {effect.leader_id}")
                if effect.leader_id == node.node_id:
                    self.stats["elections"] += 1
                    self.checker.on_leader(node)
            elif isinstance(effect, SnapshotInstalled):
                self.stats["installs"] += 1
                data = node.disk.log.read_snapshot(effect.snapshot_id)
                assert data is not None
                entries = decode_state(data)
                assert len(entries) == effect.snapshot_id.offset
                start = len(node.applied)
                # The snapshot must agree with what this node applied already.
                if entries[:start] != node.applied:
                    raise SimulationFailure(f"node {node.node_id}: snapshot disagrees with state")
                node.applied = entries
                core = node.core
                assert core is not None
                self.checker.on_applied(node, start, core.epoch)
        self._reschedule_tick(node)

    def _apply(self, node: SimNode, high_watermark: int) -> None:
        core = node.core
        assert core is not None
        start = len(node.applied)
        log = node.disk.log
        if start < log.log_start_offset:
            raise SimulationFailure(f"node {node.node_id}: state machine behind the log start")
        for e in log.entries(start, high_watermark):
            node.applied.append((e.epoch, e.data))
        self.checker.on_applied(node, start, core.epoch)

    # -- network ---------------------------------------------------------------------------
    def _send(self, envelope: M.Envelope) -> None:
        link = (envelope.src, envelope.dst)
        if self.faulty and (link in self.blocked or self.rng.random() < self.faults.drop):
            return
        copies = 2 if self.faulty and self.rng.random() < self.faults.duplicate else 1
        incarnation = self.nodes[envelope.dst].incarnation
        if not envelope.is_request:
            incarnation = self.reply_to.get((envelope.dst, envelope.correlation_id), incarnation)
        src_incarnation = self.nodes[envelope.src].incarnation
        for _ in range(copies):
            if self.faulty and self.rng.random() < 0.02:
                delay = self.rng.randint(1, self.faults.slow_delay_ms)
            else:
                delay = self.rng.randint(1, self.faults.max_delay_ms)
            self._push(self.now_ms + delay, "deliver", (envelope, incarnation, src_incarnation))

    # -- events ------------------------------------------------------------------------------
    def _step(self) -> None:
        at_ms, _, kind, payload = heapq.heappop(self.queue)
        assert at_ms >= self.now_ms
        self.now_ms = at_ms
        if kind == "deliver":
            envelope, incarnation, src_incarnation = cast(tuple[M.Envelope, int, int], payload)
            node = self.nodes[envelope.dst]
            if node.core is None or node.incarnation != incarnation:
                return
            if self.faulty and (envelope.src, envelope.dst) in self.blocked:
                return
            if envelope.is_request:
                if len(self.reply_to) > 10_000:
                    self.reply_to.clear()  # bounded; stale keys only matter across restarts
                self.reply_to[(envelope.src, envelope.correlation_id)] = src_incarnation
            self.log(f"{envelope.src}->{envelope.dst} {envelope.body}")
            self._run_effects(node, node.core.handle(envelope, self.now_ms))
        elif kind == "tick":
            node_id, incarnation = cast(tuple[int, int], payload)
            node = self.nodes[node_id]
            if node.core is None or node.incarnation != incarnation or node.tick_at_ms != at_ms:
                return
            node.tick_at_ms = -1
            self._run_effects(node, node.core.tick(self.now_ms))
        elif kind == "propose":
            self._propose()
            self._push(self.now_ms + self._exp(self.faults.propose_every_ms), "propose", None)
        elif kind == "crash":
            alive = [n for n in self.nodes.values() if n.alive]
            leaders = [n for n in alive if n.core and n.core.state == State.LEADER]
            if alive and self.faulty:
                # Leaders crash more often than others: that is where elections race.
                node = self.rng.choice(leaders if leaders and self.rng.random() < 0.6 else alive)
                self._crash(node)
                self._push(self.now_ms + self._exp(1000), "restart", node.node_id)
            if self.faulty:
                self._push(self.now_ms + self._exp(self.faults.crash_every_ms), "crash", None)
        elif kind == "restart":
            node = self.nodes[cast(int, payload)]
            if not node.alive:
                self.log(f"restart {node.node_id}")
                self._start(node)
        elif kind == "partition":
            if self.faulty:
                self._partition()
                self._push(
                    self.now_ms + self._exp(self.faults.partition_every_ms), "partition", None
                )
        elif kind == "heal":
            self.blocked = set()
            self.log("heal")
        elif kind == "snapshot":
            self._snapshot()
            self._push(self.now_ms + self._exp(self.faults.snapshot_every_ms), "snapshot", None)
        elif kind == "reconfigure":
            self._reconfigure()
            self._push(self.now_ms + self._exp(400), "reconfigure", None)
        for node in self.nodes.values():
            if node.core is not None:
                self.checker.check_node(node)

    def _propose(self) -> None:
        leaders = [n for n in self.nodes.values() if n.core and n.core.state == State.LEADER]
        if not leaders:
            return
        node = self.rng.choice(leaders)
        assert node.core is not None
        self.proposals += 1
        data = f"p{self.proposals}".encode()
        try:
            _, effects = node.core.propose([data], self.now_ms)
        except NotLeaderError:
            return
        self._run_effects(node, effects)

    def _reconfigure(self) -> None:
        """Add an observer as a voter or remove a voter (the leader itself at
        times), through the leader, as AddRaftVoter/RemoveRaftVoter would."""
        leaders = [n for n in self.nodes.values() if n.core and n.core.state == State.LEADER]
        if not leaders:
            return
        node = self.rng.choice(leaders)
        core = node.core
        assert core is not None
        voters = core.voters
        observers = sorted(set(self.nodes) - voters.ids)
        try:
            if observers and (len(voters) == 1 or self.rng.random() < 0.5):
                added = self.rng.choice(observers)
                _, effects = core.add_voter(added, ZERO_UUID, None, self.now_ms)
                self.log(f"leader {node.node_id}: add voter {added}")
            else:
                removed = node.node_id if self.rng.random() < 0.3 else self.rng.choice(
                    sorted(voters.ids))
                _, effects = core.remove_voter(removed, ZERO_UUID, self.now_ms)
                self.log(f"leader {node.node_id}: remove voter {removed}")
                if removed == node.node_id:
                    self.stats["leader_removed"] += 1
        except VoterChangeError as e:
            self.log(f"leader {node.node_id}: voter change refused: {e}")
            return
        self.stats["voter_changes"] += 1
        self._run_effects(node, effects)

    def _partition(self) -> None:
        self.stats["partitions"] += 1
        ids = sorted(self.nodes)
        roll = self.rng.random()
        leaders = [
            n.node_id for n in self.nodes.values() if n.core and n.core.state == State.LEADER
        ]
        if roll < 0.3 and leaders:  # isolate a leader
            side = {self.rng.choice(leaders)}
            self.blocked = {(a, b) for a in ids for b in ids if (a in side) != (b in side)}
        elif roll < 0.7:
            side = {i for i in ids if self.rng.random() < 0.5}
            self.blocked = {(a, b) for a in ids for b in ids if (a in side) != (b in side)}
        else:  # some one-way links
            self.blocked = {(a, b) for a in ids for b in ids if a != b and self.rng.random() < 0.3}
        self.log(f"partition {sorted(self.blocked)}")
        self._push(self.now_ms + self._exp(1500), "heal", None)

    def _snapshot(self) -> None:
        alive = [n for n in self.nodes.values() if n.core is not None]
        if not alive:
            return
        node = self.rng.choice(alive)
        core = node.core
        assert core is not None
        hw = core.high_watermark
        if hw <= node.disk.log.log_start_offset:
            return
        snapshot_id = OffsetAndEpoch(hw, node.applied[hw - 1][0])
        core.create_snapshot(snapshot_id, encode_state(node.applied[:hw]))
        self.stats["snapshots"] += 1
        self.log(f"node {node.node_id}: snapshot {snapshot_id}")

    # -- a whole run ---------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._run()
        except (AssertionError, Exception) as e:
            trace = "\n".join(self.trace)
            raise SimulationFailure(
                f"seed {self.seed} failed at step {self.steps_run}, t={self.now_ms} ms: "
                f"{type(e).__name__}: {e}\n"
                f"replay: ODRADEK_SIM_SEED={self.seed} pytest tests/simulation\n"
                f"--- last {len(self.trace)} events ---\n{trace}"
            ) from e

    def _run(self) -> None:
        for node in self.nodes.values():
            self._start(node)
        f = self.faults
        self._push(self._exp(f.propose_every_ms), "propose", None)
        if f.crash_every_ms:
            self._push(self._exp(f.crash_every_ms), "crash", None)
        if f.partition_every_ms:
            self._push(self._exp(f.partition_every_ms), "partition", None)
        if f.snapshot_every_ms:
            self._push(self._exp(f.snapshot_every_ms), "snapshot", None)
        if self.membership:
            self._push(self._exp(400), "reconfigure", None)
        while self.steps_run < self.steps and self.queue:
            self._step()
            self.steps_run += 1
        self._check_liveness()

    def _check_liveness(self) -> None:
        """Heal everything; within LIVENESS_BOUND_MS a leader must commit a new entry
        on every node."""
        self.faulty = False
        self.blocked = set()
        self.log("liveness: heal, restart all")
        for node in self.nodes.values():
            if not node.alive:
                self._start(node)
        self.queue = [e for e in self.queue if e[2] in ("deliver", "tick")]
        heapq.heapify(self.queue)
        deadline_ms = self.now_ms + LIVENESS_BOUND_MS
        marker: tuple[int, int] | None = None  # (node, offset) of the liveness entry
        data = b"liveness"
        while self.now_ms < deadline_ms and self.queue:
            if marker is None:
                leaders = [
                    n for n in self.nodes.values() if n.core and n.core.state == State.LEADER
                ]
                if leaders:
                    node = leaders[0]
                    assert node.core is not None
                    offset, effects = node.core.propose([data], self.now_ms)
                    marker = (node.node_id, offset)
                    self._run_effects(node, effects)
            elif all(
                len(n.applied) > marker[1] and n.applied[marker[1]][1] == data
                for n in self.nodes.values()
            ):
                return
            self._step()
            self.steps_run += 1
            if marker is not None:
                leader = self.nodes[marker[0]].core
                assert leader is not None
                if leader.state != State.LEADER and not any(
                    len(n.applied) > marker[1] and n.applied[marker[1]][1] == data
                    for n in self.nodes.values()
                ):
                    marker = None  # that leader lost its epoch before committing: ask again
        raise SimulationFailure(
            f"no liveness: {LIVENESS_BOUND_MS} ms after healing, "
            + ", ".join(
                f"{n.node_id}:{n.core.state.value if n.core else 'down'}"
                f"@{n.core.epoch if n.core else '-'} hw={n.core.high_watermark if n.core else '-'}"
                for n in self.nodes.values()
            )
        )
