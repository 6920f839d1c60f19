"""`bench/cluster.py` runs end to end at a tiny size (issue 18: the figures live
in bench/, so the bench itself must keep working).

Throughput: two rounds of RF=1 then RF=3 on one single node and one 3-broker
cluster; the JSON carries each round, the medians and the per-run figures the
docs quote (context switches, page faults, RSS, librdkafka's batches).
Latency: one short paced run with --dump-latencies, whose CSV has a row per
record. The figures themselves are not judged here (a timed assertion on a
shared machine would be noise); only that they are there and sane.
"""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cpu_quota import available

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "cluster.py"
_QUOTA_MISSING = available()


def _run(*args: str, timeout: float = 240) -> dict:
    out = subprocess.run([sys.executable, str(BENCH), *args], cwd=REPO, capture_output=True,
                         text=True, timeout=timeout, check=False)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    written = [line for line in out.stdout.splitlines() if line.startswith("written to ")]
    assert written, out.stdout[-2000:]
    return json.loads(Path(written[-1].removeprefix("written to ")).read_text())


def test_throughput_rounds_and_medians() -> None:
    # 40,000 records: RF=1's CPU over a few hundredths of a second, several clock
    # ticks (4,000 once read as 0 s: no ratio)
    result = _run("--records", "40000", "--rounds", "0", "--repeat", "2",
                  "--throughput-acks", "all", "--batch-bytes", "200000")
    assert result["batch_bytes"] == 200000 and result["recycled_free_pages"] is True
    assert len(result["rounds"]) == 2
    ratios = result["cpu_ratio_per_record_less_idle_rounds"]
    assert len(ratios) == 2 and None not in ratios
    assert result["cpu_ratio_per_record_less_idle"] == pytest.approx(statistics.median(ratios))
    for r in result["rounds"]:
        for setup in ("single_rf1", "cluster_rf3"):
            run = r[setup]
            assert run["records"] == 40000 and run["records_per_s"] > 0
            assert run["broker_cpu_s"] > 0
            vol, invol = run["broker_ctx_switches_per_1k_records"]
            assert vol >= 0 and invol >= 0
            before, after = run["broker_rss_mib"]
            assert 0 < before and 0 < after
            # 40,000 x 1 KiB in batches of at most 200 kB: at least 200 batches
            assert run["client_batches"] >= 200
            assert run["client_records_per_batch"] <= 200


def test_latency_dump(tmp_path: Path) -> None:
    result = _run("--latency", "--setups", "single", "--acks", "1", "--linger-ms", "0",
                  "--rate", "200", "--seconds", "1", "--dump-latencies", str(tmp_path))
    run = result["single_rf1_acks1_linger0"]
    assert run["errors"] == 0 and run["produce"]["n"] == 200 and run["e2e"]["n"] == 200
    rows = list(csv.DictReader((tmp_path / "single_rf1_acks1_linger0.csv").open()))
    assert [int(r["record"]) for r in rows] == list(range(200))
    assert all(float(r["produce_ms"]) > 0 and float(r["e2e_ms"]) > 0 for r in rows)
    sent = [float(r["sent_s"]) for r in rows]
    assert sent == sorted(sent) and sent[-1] < 5


@pytest.mark.skipif(_QUOTA_MISSING is not None, reason=f"no CPU quota here: {_QUOTA_MISSING}")
def test_throughput_with_broker_cpu_quotas() -> None:
    # --broker-cores: every broker process in its own cgroup (bench/cpu_quota.py)
    result = _run("--records", "40000", "--rounds", "0", "--broker-cores", "0.5",
                  "--batch-bytes", "200000")
    assert result["broker_cores"] == 0.5
    for setup, processes in (("single_rf1", 1), ("cluster_rf3", 4)):
        run = result[setup]
        assert run["broker_quota_cores"] == [0.5] * processes
        assert len(run["broker_cores_used"]) == processes
        # no process used more than its half core (a tick's slack)
        assert all(0 <= c <= 0.6 for c in run["broker_cores_used"]), run["broker_cores_used"]
        assert all(t >= 0 for t in run["broker_throttled_periods"])
        assert run["box_cores_used"] > 0
    leftovers = [p.name for p in Path("/sys/fs/cgroup/cpu").glob("odradek-bench-rf*")]
    assert leftovers == [] or not Path("/sys/fs/cgroup/cpu").exists(), leftovers
