"""Reproduction: librdkafka 2.16's AdminClient aborts in ListConsumerGroupOffsets
when its group coordinator goes away and comes back.

    PYTHONPATH=. python -m tests.chaos.librdkafka_admin_crash [SECONDS] [--no-rebootstrap]

One odradek broker, a group `g` with committed offsets on topic `t`, and a child
process calling `AdminClient.list_consumer_group_offsets` (request_timeout 2 s) in
a loop with librdkafka's admin/protocol/broker debug log, while the broker is
killed (-9) and restarted or paused (SIGSTOP, 0.5-4 s) every few seconds. A child
that dies is replaced; the run prints each death with its log file.

Found (2026-11-26, 150 s runs): 5 and 7 children aborted with
`rdkafka_queue.h:1086: rd_kafka_enq_once_del_source_return: Assertion
'eonce->refcnt > 0' failed` (the chaos run's segfaults of the offset watcher are
the same use-after-free, when the freed memory is reused rather than caught by
the assertion). What odradek answered just before each abort was valid and is
what Kafka answers:
- with librdkafka's default re-bootstrap: the broker restarted, librdkafka
  decommissioned broker 1 ("Starting re-bootstrap sequence"), then
  MetadataResponse v13 (57 bytes: broker 1 at 127.0.0.1:port) and
  FindCoordinatorResponse v2 (27 bytes: error 0, node 1, 127.0.0.1, the same
  port); the coordinator request went to the decommissioned handle and failed;
- with `metadata.recovery.strategy=none`: only ApiVersionsResponse v3 (473 bytes,
  the same bytes as on every connection) right before the abort, after earlier
  admin requests had timed out ("Failed while waiting for response from broker:
  Local: Timed out") while the broker was down.
So no odradek answer is at fault: an admin request to a coordinator whose
connection fails (or whose request times out while it is down) frees its
`eonce` on the error path while librdkafka's coordinator-request state machine
still holds it: confluentinc/librdkafka#5397 (open; also issues #3663 and
#4605). Workaround (the issue's): a fresh AdminClient per call. The same 150 s
run with a client per call: 0 aborts in 575 calls. tests/chaos's offset watcher
does that, and still runs in a child process of its own, replaced if it dies.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r'''
import sys, time
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
conf = {"bootstrap.servers": sys.argv[1], "debug": "admin,protocol,broker"}
if sys.argv[2:] == ["--no-rebootstrap"]:
    conf["metadata.recovery.strategy"] = "none"
admin = AdminClient(conf)
n = 0
while True:
    req = ConsumerGroupTopicPartitions("g", [TopicPartition("t", p) for p in range(3)])
    try:
        parts = admin.list_consumer_group_offsets([req], request_timeout=2)["g"].result(5)
        print("ok", n, [(p.partition, p.offset) for p in parts.topic_partitions], flush=True)
    except (KafkaException, TimeoutError) as e:
        print("error", n, e, flush=True)
    n += 1
    time.sleep(0.05)
'''


def main(argv: list[str]) -> int:
    from confluent_kafka import Consumer, TopicPartition

    from tests.integration.broker_proc import BrokerProcess
    from tests.integration.clients import create_topic

    seconds = float(argv[0]) if argv and not argv[0].startswith("-") else 150.0
    extra = [a for a in argv if a == "--no-rebootstrap"]
    work = Path(tempfile.mkdtemp(prefix="admin-crash-"))
    (work / "child.py").write_text(CHILD)
    proc = BrokerProcess(data_dir=work / "data")
    proc.start()
    deaths = 0
    child: subprocess.Popen[bytes] | None = None
    try:
        create_topic(proc.bootstrap, "t", 3)
        c = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": "g"})
        c.commit(offsets=[TopicPartition("t", p, 5) for p in range(3)], asynchronous=False)
        c.close()
        end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < end:
            if child is None or child.poll() is not None:
                if child is not None:
                    deaths += 1
                    print(f"child died (rc {child.returncode}): {work}/child{n}.log", flush=True)
                n += 1
                with open(work / f"child{n}.log", "wb") as out:
                    child = subprocess.Popen(
                        [sys.executable, str(work / "child.py"), proc.bootstrap, *extra],
                        stdout=out, stderr=subprocess.STDOUT)
            time.sleep(random.uniform(0.5, 3))
            if random.random() < 0.5:
                proc.kill9()
            else:
                assert proc.pid is not None
                os.kill(proc.pid, signal.SIGSTOP)
                time.sleep(random.uniform(0.5, 4))
                os.kill(proc.pid, signal.SIGCONT)
            time.sleep(random.uniform(0.0, 2))
            if not proc.is_running():
                proc.start()
    finally:
        if child is not None:
            child.kill()
        proc.close()
    print(f"{deaths} admin child(ren) died in {seconds:.0f} s; logs in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
