"""examples/spark_balances.py, as the README runs it, on the shared session and
broker: two rounds of transfers, the exactly-once balances job after each, and
the example's own check; then the balances are checked here once more."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.spark.helpers import load_example


def test_spark_balances_example(spark: Any, spark_broker: Any, topic_name: str, tmp_path: Path) -> None:
    example = load_example()
    accounts = 6
    result = example.main(
        ["--bootstrap", spark_broker.bootstrap, "--prefix", f"{topic_name}-", "--accounts", str(accounts),
         "--transfers", "150", "--rounds", "2", "--checkpoint", str(tmp_path)],
        spark=spark,
    )
    assert result["problems"] == []
    assert len(result["balances"]) == accounts
    assert result["total"] == result["deposits"] == accounts * example.DEPOSIT
    assert any(v != example.DEPOSIT for v in result["balances"].values())
    # Two rounds: the job ran twice from one checkpoint, at least a batch each.
    commits = list((tmp_path / f"{topic_name}-balances" / "commits").glob("[0-9]*"))
    assert len(commits) >= 2, commits
