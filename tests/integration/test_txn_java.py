"""Exactly-once read-process-write with the Apache Kafka Java client (kafka-clients 3.9).

`java/OdradekJavaTxn.java` copies an input topic to an output topic with
transactions and `sendOffsetsToTransaction` while a second worker joins the
consumer group and the first leaves (two rebalances), then checks every input
record is in the output exactly once (read_committed), that a second producer
with the same transactional.id fences the first, and the Admin transaction
APIs; one `STEP <name> ok|FAIL` line per step.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.integration.test_java_client import compile_java
from tests.integration.txn_helpers import TXN_BROKER

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

SOURCE = Path(__file__).parent / "java" / "OdradekJavaTxn.java"
RUN_TIMEOUT_S = 240
RECORDS = 3000


@pytest.fixture(scope="module")
def txn_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_java(SOURCE, tmp_path_factory)


def test_java_read_process_write_is_exactly_once_across_rebalances(
        broker_factory, txn_classpath: str, topic_name: str) -> None:
    b = broker_factory(TXN_BROKER)
    result = subprocess.run(
        ["java", "-Xmx384m", "-cp", txn_classpath, "OdradekJavaTxn", b.bootstrap,
         f"{topic_name}-in", f"{topic_name}-out", str(RECORDS)],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    print(result.stdout[-6000:])
    print(result.stderr[-4000:])
    steps = dict(re.findall(r"^STEP (\S+) (ok|FAIL)", result.stdout, re.MULTILINE))
    assert set(steps) == {"setup", "copy", "verify", "fence", "admin"}, (
        f"exit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    failed = sorted(name for name, state in steps.items() if state == "FAIL")
    assert not failed and result.returncode == 0, (
        f"Java transaction steps failed: {failed}\n{result.stdout[-4000:]}")
