"""The chaos run, bounded for CI: ODRADEK_CHAOS_S seconds of faults (default 60).

tests/chaos/run.py has what it does and checks; `scripts/chaos --minutes 30`
runs it as long as wanted. The seed is fixed here unless ODRADEK_CHAOS_SEED
names another (it is printed either way).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos.run import run

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

CHAOS_S = float(os.environ.get("ODRADEK_CHAOS_S", "60"))
SEED = int(os.environ.get("ODRADEK_CHAOS_SEED", "20261125"))


@pytest.mark.timeout(CHAOS_S + 900)
def test_nothing_acknowledged_is_lost_under_a_run_of_faults(tmp_path: Path) -> None:
    report = run(tmp_path, CHAOS_S, SEED)
    assert sum(report.faults.values()) >= max(3, int(CHAOS_S / 20))
    assert report.acked > 1000 and report.txn_committed > 0 and report.commits > 0
