"""The Spark source's and sink's librdkafka clients log through Python logging
(odradek.spark.broker.client_conf), never as raw `%N|...` lines on stderr."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = r"""
import logging, sys, time
from confluent_kafka import Consumer
from odradek.spark.broker import LIBRDKAFKA_LOG, client_conf

seen = []
class Keep(logging.Handler):
    def emit(self, record):
        seen.append(record.getMessage())
LIBRDKAFKA_LOG.addHandler(Keep())
LIBRDKAFKA_LOG.setLevel(logging.DEBUG)
raw = sys.argv[1] == "raw"
conf = {"bootstrap.servers": "127.0.0.1:1"} if raw else client_conf("127.0.0.1:1", {})
c = Consumer({**conf, "group.id": "g"})
c.subscribe(["t"])
deadline = time.monotonic() + 3
while time.monotonic() < deadline:
    c.poll(0.2)
c.close()
print(len(seen))
"""


def _run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True,
                          text=True, timeout=60, check=False)


def test_librdkafka_lines_go_to_the_logger_not_stderr() -> None:
    raw = _run("raw")  # the control: a client without the logger prints to stderr
    assert raw.returncode == 0, raw.stderr
    assert "%3|" in raw.stderr and raw.stdout.strip() == "0"
    routed = _run("logger")
    assert routed.returncode == 0, routed.stderr
    assert "%3|" not in routed.stderr and "rdkafka#" not in routed.stderr, routed.stderr
    assert int(routed.stdout.strip()) > 0  # the same lines reached Python logging
