"""Seeded Raft schedules with KIP-853 membership changes (see cluster.py).

Some nodes start as observers; every ~400 simulated ms the leader adds an
observer as a voter or removes a voter (itself at times), one change at a
time, while crashes, partitions, drops and snapshots go on. The checker's
invariants hold after every step (one leader per epoch, committed entries
never lost or changed, a new leader holds everything committed before it),
and after healing every node, voter or observer, applies a new entry.
``ODRADEK_SIM_SEED=<seed>`` replays one schedule.
"""

from __future__ import annotations

import os

import pytest

from tests.simulation.cluster import Simulation

SCHEDULES = int(os.environ.get("ODRADEK_SIM_MEMBERSHIP_SCHEDULES", "300"))
CHUNKS = 6
REPLAY_SEED = os.environ.get("ODRADEK_SIM_SEED")


def run_seed(seed: int, steps: int = 1500) -> Simulation:
    sim = Simulation(seed, steps, membership=True)
    sim.run()
    return sim


@pytest.mark.skipif(REPLAY_SEED is not None, reason="replaying one seed")
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_membership_schedules_keep_raft_invariants(chunk: int) -> None:
    changes = removed_leaders = 0
    for seed in range(chunk, SCHEDULES, CHUNKS):
        sim = run_seed(seed)
        changes += sim.stats["voter_changes"]
        removed_leaders += sim.stats["leader_removed"]
    assert changes > 0
    print(f"chunk {chunk}: {changes} voter changes, {removed_leaders} leaders removed")


def test_membership_changes_happen_and_replay_exactly() -> None:
    seed = int(REPLAY_SEED) if REPLAY_SEED is not None else 3
    a, b = run_seed(seed, 3000), run_seed(seed, 3000)
    if REPLAY_SEED is not None:
        print("\n".join(a.trace))
    assert list(a.trace) == list(b.trace)
    assert a.stats["voter_changes"] >= 5 and a.stats["leader_removed"] >= 1, a.stats
