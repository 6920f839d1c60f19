"""Tiered storage against a real S3 server (SeaweedFS through s3fs): the broker copies
closed segments to s3://bucket/prefix with the layout contract, deletes them locally,
serves reads from offset 0 across the tiers, and topic deletion empties the prefix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.clients import (
    Out,
    ck_admin,
    ck_consume,
    ck_produce,
    create_topic,
    wait_until,
)
from tests.integration.s3_server import s3_server  # noqa: F401 - the session fixture
from tests.integration.tiered_helpers import (
    TIERED_BROKER,
    list_offsets,
    local_segment_bytes,
    tiered_topic,
    wait_copies_settled,
)

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

N = 400


def _start_and_produce(broker_factory, server, prefix: str, topic: str, tag: bytes,
                       extra: dict[str, str] | None = None) -> tuple[Any, list[Out]]:
    """A tiered broker on s3://<prefix> and N records produced to a new topic."""
    proc = broker_factory({
        **TIERED_BROKER,
        "rsm.config.url": f"s3://{prefix}",
        "rsm.config.fs.endpoint_url": server.endpoint_url,
        "rsm.config.fs.key": server.key,
        "rsm.config.fs.secret": server.secret,
        **(extra or {}),
    })
    create_topic(proc.bootstrap, topic, 1, config=tiered_topic())
    outs = [Out(key=b"k%05d" % i, value=b"%s-%05d-" % (tag, i) * (12 + i % 11), partition=0)
            for i in range(N)]
    ck_produce(proc.bootstrap, topic, outs, **{"linger.ms": 0, "batch.num.messages": 5,
                                                "compression.type": "none"})
    return proc, outs


def test_copy_read_and_delete_on_s3(broker_factory, topic_name, s3_server):  # noqa: F811
    bucket = s3_server.bucket("odradek-tier")
    prefix = f"{bucket}/{topic_name[:20]}"
    proc, outs = _start_and_produce(broker_factory, s3_server, prefix, topic_name, b"s3")
    wait_until(lambda: list_offsets(proc.port, topic_name, -4, 8)[1] > 0, timeout=60,
               desc="segments copied to S3 and deleted locally")
    assert list_offsets(proc.port, topic_name, -2, 8) == (0, 0)
    wait_copies_settled(proc.port, topic_name)

    fs = s3_server.fs()

    def settled() -> bool:  # a copy in flight has its .log but not yet its marker
        found = fs.find(prefix)
        return sum(p.endswith(".metadata") for p in found) >= sum(
            p.endswith(".log") for p in found)

    wait_until(settled, timeout=30, desc="every uploaded .log has its marker")
    objects = fs.find(prefix)
    logs = sorted(p for p in objects if p.endswith(".log"))
    assert logs
    for suffix in ("index", "timeindex", "txnindex", "snapshot", "leader-epoch-checkpoint",
                   "metadata"):
        assert len([p for p in objects if p.endswith("." + suffix)]) >= len(logs), suffix
    part_dir = logs[0].rsplit("/", 1)[0]
    assert part_dir.startswith(f"{prefix}/{topic_name}-") and part_dir.endswith("/0")
    local = Path(proc.data_dir) / f"{topic_name}-0"
    for obj in logs[:3]:
        base = obj.rsplit("/", 1)[1].split("-", 1)[0]
        assert fs.cat_file(obj) == local_segment_bytes(local, base)

    # dump-log reads a remote segment by URL
    dump = subprocess.run(
        [sys.executable, "-m", "odradek", "dump-log", "--verify", "--deep-iteration",
         "--files", f"s3://{logs[0]}",
         "--remote-option", f"endpoint_url={s3_server.endpoint_url}",
         "--remote-option", f"key={s3_server.key}",
         "--remote-option", f"secret={s3_server.secret}"],
        capture_output=True, text=True, timeout=60, check=False)
    assert dump.returncode == 0 and "no problems found" in dump.stdout, dump.stderr

    got = ck_consume(proc.bootstrap, topic_name, N, timeout=60)
    assert [(r.key, r.value) for r in got] == [(o.key, o.value) for o in outs]

    admin = ck_admin(proc.bootstrap)
    admin.delete_topics([topic_name])[topic_name].result(timeout=30)
    wait_until(lambda: not fs.find(f"{prefix}/{topic_name}-"), timeout=30,
               desc="the topic's objects removed from S3")


def test_s3_restart_mid_copy_loses_nothing(broker_factory, topic_name, s3_server):  # noqa: F811
    bucket = s3_server.bucket("odradek-tier")
    prefix = f"{bucket}/restart-{topic_name[-10:]}"
    # 8 kB/s: the copies take seconds, so the store goes away in the middle of them
    proc, outs = _start_and_produce(broker_factory, s3_server, prefix, topic_name,
                                    b"restart",
                                    {"remote.log.manager.copy.max.bytes.per.second": "8000"})
    fs = s3_server.fs()
    wait_until(lambda: any(p.endswith(".log") for p in fs.find(prefix)), timeout=60,
               desc="copies under way")
    end_before = list_offsets(proc.port, topic_name, -1, 9)[1]
    s3_server.restart()
    # more records after the outage: segments that can only be copied after it (on a
    # loaded machine every earlier copy may have finished before the restart)
    more = [Out(key=b"m%05d" % i, value=b"after-%05d-" % i * (12 + i % 11), partition=0)
            for i in range(N)]
    ck_produce(proc.bootstrap, topic_name, more, **{"linger.ms": 0, "batch.num.messages": 5,
                                                     "compression.type": "none"})
    wait_until(lambda: list_offsets(proc.port, topic_name, -5, 9)[1] >= end_before,
               timeout=120, desc="copies went on after the restart")
    wait_copies_settled(proc.port, topic_name)
    got = ck_consume(proc.bootstrap, topic_name, 2 * N, timeout=60)
    assert [(r.key, r.value) for r in got] == [(o.key, o.value) for o in outs + more]
    # every object left belongs to a visible segment: failed copies were cleaned up
    wait_until(lambda: not _orphans(s3_server.fs(), prefix), timeout=30,
               desc="no orphan left")


def _orphans(fs, prefix: str) -> set[str]:
    objects = fs.find(prefix)
    stems = {p.rsplit("/", 1)[1].split(".", 1)[0] for p in objects}
    marked = {p.rsplit("/", 1)[1].split(".", 1)[0] for p in objects if p.endswith(".metadata")}
    return stems - marked
