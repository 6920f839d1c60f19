"""`odradek transactions list | describe | abort` against a hanging transaction."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.clients import create_topic
from tests.integration.test_txn import KILLED_PRODUCER
from tests.integration.txn_helpers import TXN_BROKER, end_offset, txn_producer

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


def _cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "transactions",
                           "--bootstrap-server", bootstrap, *args],
                          check=False, capture_output=True, text=True, timeout=60)


def test_cli_finds_describes_and_aborts_a_hanging_transaction(broker_factory, topic_name):
    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 1)
    child = subprocess.Popen([sys.executable, "-c", KILLED_PRODUCER, b.bootstrap, topic_name,
                              "tx-hung"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "SENT"
    finally:
        child.kill()
        child.wait(10)
    assert end_offset(b.bootstrap, topic_name, 0, True) == 0

    listed = _cli(b.bootstrap, "list", "--state", "Ongoing")
    assert listed.returncode == 0, listed.stderr
    assert "tx-hung" in listed.stdout and "Ongoing" in listed.stdout

    described = _cli(b.bootstrap, "describe", "--transactional-id", "tx-hung")
    assert described.returncode == 0, described.stderr
    assert f"{topic_name}-0" in described.stdout and "Ongoing" in described.stdout

    missing = _cli(b.bootstrap, "describe", "--transactional-id", "no-such-id")
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr.upper()

    wrong = _cli(b.bootstrap, "abort", "--topic", topic_name, "--partition", "0",
                 "--start-offset", "3")
    assert wrong.returncode == 1

    aborted = _cli(b.bootstrap, "abort", "--topic", topic_name, "--partition", "0",
                   "--start-offset", "0")
    assert aborted.returncode == 0, aborted.stderr
    # the ABORT marker at offset 5 unblocks read_committed readers
    assert end_offset(b.bootstrap, topic_name, 0, True) == 6

    p = txn_producer(b.bootstrap, "tx-fresh")  # never started a transaction: Empty
    fresh = _cli(b.bootstrap, "describe", "--transactional-id", "tx-fresh")
    assert fresh.returncode == 0, fresh.stderr
    assert "Empty" in fresh.stdout and "None" in fresh.stdout
    p.begin_transaction()
    p.produce(topic_name, value=b"x", partition=0)
    p.commit_transaction(30)
    done = _cli(b.bootstrap, "describe", "--transactional-id", "tx-fresh")
    assert "CompleteCommit" in done.stdout, done.stdout
