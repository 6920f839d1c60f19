"""Issue 12: mutated requests from real clients never kill, hang or bloat a broker.

Each run fuzzes a fresh broker (tests/fuzz/runner.py): corpus frames recorded
from confluent-kafka, kafka-python and aiokafka, mutated, sent over many
connections; the broker must answer or close, keep serving, stay within its
RSS bound, stop on SIGTERM and pass `dump-log --verify`. One run has a fixed
seed, one a fresh seed that it prints (rerun it with `scripts/fuzz --seed S`).
`scripts/fuzz --frames N` runs any number.
"""

from __future__ import annotations

import random

import pytest

from tests.fuzz.runner import run

pytestmark = [pytest.mark.timeout(150), pytest.mark.odradek_only]

FIXED_SEED = 12
FRAMES_PER_RUN = 10_000


def test_fuzzed_frames_with_the_fixed_seed_leave_the_broker_serving() -> None:
    report = run(FRAMES_PER_RUN, FIXED_SEED)
    print(report.text())
    assert report.stats.frames == FRAMES_PER_RUN


def test_fuzzed_frames_with_a_fresh_seed_leave_the_broker_serving() -> None:
    seed = random.SystemRandom().randrange(2**32)
    print(f"fuzz seed {seed} (replay: scripts/fuzz --seed {seed} --frames {FRAMES_PER_RUN})")
    report = run(FRAMES_PER_RUN, seed)
    print(report.text())
    assert report.stats.frames == FRAMES_PER_RUN
