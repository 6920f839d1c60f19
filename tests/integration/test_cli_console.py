"""`odradek produce` and `odradek consume` as a user runs them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.clients import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


def _odradek(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", *args], input=stdin,
                          capture_output=True, text=True, timeout=90, check=False)


def test_console_produce_then_consume_round_trip(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    r = _odradek("produce", topic_name, "--bootstrap-server", broker.bootstrap,
                 "--key-separator", ":", "--header", "src=cli", "--compression", "zstd",
                 stdin="k1:hello\nk2:world\nno-key\n")
    assert r.returncode == 0, r.stderr
    r = _odradek("consume", topic_name, "--bootstrap-server", broker.bootstrap,
                 "--from-beginning", "--max-messages", "3", "--timeout", "15",
                 "--print-key", "--print-headers", "--print-offset")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "0:0\tk1\tsrc=cli\thello", "0:1\tk2\tsrc=cli\tworld", "0:2\tnull\tsrc=cli\tno-key"]
    assert "Processed a total of 3 messages" in r.stderr


def test_console_consume_as_a_group_commits(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    _odradek("produce", topic_name, "--bootstrap-server", broker.bootstrap,
             stdin="".join(f"v{i}\n" for i in range(10)))
    group = f"g-{topic_name}"
    r = _odradek("consume", topic_name, "--bootstrap-server", broker.bootstrap, "--group", group,
                 "--from-beginning", "--max-messages", "10", "--timeout", "20")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == sorted(f"v{i}" for i in range(10))
    # a second run of the same group has nothing left to read
    r = _odradek("consume", topic_name, "--bootstrap-server", broker.bootstrap, "--group", group,
                 "--timeout", "6")
    assert r.returncode == 0 and r.stdout == ""


def test_console_errors(broker, topic_name):
    r = _odradek("consume", "missing-" + topic_name, "--bootstrap-server", broker.bootstrap,
                 "--timeout", "3")
    assert r.returncode == 1 and "does not exist" in r.stderr
    r = _odradek("produce", topic_name, "--header", "nokv", stdin="x\n")
    assert r.returncode == 2 and "K=V" in r.stderr
