"""Consumer groups with the Apache Kafka Java client (kafka-clients 3.9).

`java/OdradekJavaGroups.java` runs three classic members of one group, commits
with metadata, makes one leave, describes, lists offsets and deletes the group
through the Admin client, then runs a KIP-848 (`group.protocol=consumer`)
group of two, printing a `STEP <name> ok|FAIL` line per step.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.broker_proc import BrokerProcess
from tests.integration.test_groups_helpers import start_group_broker
from tests.integration.test_java_client import compile_java

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

SOURCE = Path(__file__).parent / "java" / "OdradekJavaGroups.java"
RUN_TIMEOUT_S = 180


@pytest.fixture(scope="module")
def groups_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_java(SOURCE, tmp_path_factory)


@pytest.fixture
def gbroker(broker_kind: str, tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = start_group_broker(tmp_path, broker_kind)
    try:
        yield proc
    finally:
        proc.close()


def test_java_client_group_share_commit_leave_describe_delete(
    gbroker: BrokerProcess, groups_classpath: str, topic_name: str
) -> None:
    result = subprocess.run(
        [
            "java",
            "-Xmx256m",
            "-cp",
            groups_classpath,
            "OdradekJavaGroups",
            gbroker.bootstrap,
            topic_name,
        ],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    print(result.stdout)
    print(result.stderr[-4000:])
    steps = dict(re.findall(r"^STEP (\S+) (ok|FAIL)", result.stdout, re.MULTILINE))
    assert set(steps) == {"setup", "share", "commit", "leave", "describe", "delete", "kip848"}, (
        f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-4000:]}"
    )
    failed = sorted(name for name, state in steps.items() if state == "FAIL")
    assert not failed and result.returncode == 0, f"Java group steps failed: {failed}"
