"""examples/spark_balances.py, as the README runs it, on the shared session and
broker: two rounds of transfers, the exactly-once balances job after each, and
the example's own check; then the balances are checked here once more."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from tests.integration.broker_proc import REPO_ROOT


def _load_example() -> Any:
    path = Path(REPO_ROOT) / "examples" / "spark_balances.py"
    spec = importlib.util.spec_from_file_location("spark_balances", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_spark_balances_example(spark: Any, spark_broker: Any, topic_name: str, tmp_path: Path) -> None:
    example = _load_example()
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
