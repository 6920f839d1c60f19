"""Liveness after a leader dies for good: the survivors elect a new one.

A small pump, not the seeded simulator: three cores on a lossless network
with 1 ms messages, ticked at the deadlines they ask for. The leader of the
first epoch crashes and never returns; the two others must elect a leader
within a bound. The simulator's liveness check restarts every node before it
asks for a leader, so a survivor pair that keeps following the dead leader
(KIP-996: a pre-vote answer naming it must not pull a Prospective back to it)
only shows here.
"""

from __future__ import annotations

import heapq
import random

import pytest

from odradek.raft import messages as M
from odradek.raft.config import RaftConfig, VoterSet
from odradek.raft.core import RaftCore
from odradek.raft.effects import Effect, Send
from odradek.raft.log import InMemoryRaftLog
from odradek.raft.state import ElectionState, State

ELECTION_BOUND_MS = 20_000  # from the crash: many election timeouts, never a stall
MESSAGE_DELAY_MS = 1


class Pump:
    def __init__(self, seed: int) -> None:
        config = RaftConfig(voters=VoterSet.of(1, 2, 3))
        self.cores = {
            n: RaftCore(n, config, InMemoryRaftLog(), ElectionState(), random.Random(seed * 10 + n))
            for n in (1, 2, 3)
        }
        self.alive = {1, 2, 3}
        self.now_ms = 0
        self.queue: list[tuple[int, int, M.Envelope | int]] = []
        self.seq = 0
        for node_id, core in self.cores.items():
            self._run(node_id, core.start(0))

    def _push(self, at_ms: int, item: M.Envelope | int) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (at_ms, self.seq, item))

    def _run(self, node_id: int, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Send):
                self._push(self.now_ms + MESSAGE_DELAY_MS, effect.envelope)
        deadline_ms = max(self.cores[node_id].next_deadline_ms(), self.now_ms + 1)
        self._push(deadline_ms, node_id)

    def step(self) -> None:
        at_ms, _, item = heapq.heappop(self.queue)
        self.now_ms = at_ms
        if isinstance(item, M.Envelope):
            if item.dst in self.alive and item.src in self.alive:
                self._run(item.dst, self.cores[item.dst].handle(item, at_ms))
        elif item in self.alive:
            core = self.cores[item]
            if at_ms >= core.next_deadline_ms():
                self._run(item, core.tick(at_ms))

    def leaders(self) -> list[RaftCore]:
        return [self.cores[n] for n in self.alive if self.cores[n].state == State.LEADER]

    def run_until(self, done: object, bound_ms: int) -> bool:
        deadline_ms = self.now_ms + bound_ms
        while self.queue and self.now_ms < deadline_ms:
            if callable(done) and done():
                return True
            self.step()
        return False


@pytest.mark.parametrize("seed", range(20))
def test_survivors_elect_a_new_leader_after_the_leader_dies_for_good(seed: int) -> None:
    pump = Pump(seed)
    # Everyone settles on a leader and fetches from it for a while.
    assert pump.run_until(lambda: len(pump.leaders()) == 1, 30_000)
    old = pump.leaders()[0]
    settle_until_ms = pump.now_ms + 3_000
    pump.run_until(lambda: pump.now_ms >= settle_until_ms, 10_000)
    assert old.state == State.LEADER
    pump.alive.discard(old.node_id)
    crashed_at_ms = pump.now_ms

    elected = pump.run_until(
        lambda: any(core.epoch > old.epoch for core in pump.leaders()), ELECTION_BOUND_MS
    )
    states = {n: (c.state.value, c.epoch, c.leader_id) for n, c in pump.cores.items()}
    assert elected, f"no new leader {ELECTION_BOUND_MS} ms after node {old.node_id} died: {states}"
    assert pump.now_ms - crashed_at_ms < ELECTION_BOUND_MS
