"""ShareFetch answers draw from `odradek.fetch.memory.max.bytes`, the budget of
consumer Fetch answers (odradek/broker/fetch_memory.py): share clients, each in
its own share group, ask for 64 MiB answers, never read them and never
acknowledge, while two librdkafka ShareConsumers of another group read the
whole topic. With a small budget the broker's RSS stays bounded, the readers
still read every record, and the budget is given back when the stuck clients go.
Without one, every stuck client's answer (up to the group's record locks per
partition) sits in the broker's write buffer."""

from __future__ import annotations

import io
import os
import threading
import uuid

import pytest
from confluent_kafka import ShareConsumer
from kio.serial import entity_writer

from odradek.protocol import api, entities
from tests.integration.clients import Wire, ck_common, create_topic, wait_until
from tests.integration.test_connection_limits import RssSampler, _metric, _start
from tests.integration.test_fetch_memory import PARTITIONS, RECORDS, VALUE, _fill
from tests.integration.test_groups_helpers import kio_call
from tests.integration.test_share_groups import _new_group

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

MiB = 1024 * 1024
STUCK = int(os.environ.get("ODRADEK_SHARE_MEMORY_STUCK", "10"))
READERS = 2
K = api.ApiKey


def _share_fetch_body(group: str, topic_id: uuid.UUID) -> bytes:
    cls = api.request_class(K.SHARE_FETCH, 1)
    buf = io.BytesIO()
    entity_writer(cls)(buf, entities.build(cls, {
        "group_id": group, "member_id": uuid.uuid4().hex, "share_session_epoch": 0,
        "max_wait": 500, "min_bytes": 1, "max_bytes": 64 * MiB, "max_records": 1_000_000,
        "batch_size": 1_000_000, "topics": [{"topic_id": topic_id, "partitions": [
            {"partition_index": p, "acknowledgement_batches": []}
            for p in range(PARTITIONS)]}],
        "forgotten_topics_data": []}))
    return buf.getvalue()


def _read(bootstrap: str, group: str, topic: str, seen: set[tuple[int, int]],
          lock: threading.Lock, errors: list[BaseException]) -> None:
    try:
        c = ShareConsumer({**ck_common(bootstrap), "group.id": group})
        c.subscribe([topic])
        try:
            while len(seen) < RECORDS:
                for m in c.poll(0.5):  # implicit acknowledgement on the next poll
                    if m.error() is None:
                        with lock:
                            seen.add((m.partition(), m.offset()))
        finally:
            c.close()
    except BaseException as e:  # noqa: BLE001 - reported by the test
        errors.append(e)


def test_share_fetches_draw_from_the_fetch_memory_budget(broker_factory, topic_name,
                                                         record_property):
    budget = int(os.environ.get("ODRADEK_SHARE_MEMORY_BUDGET", str(8 * MiB)))
    proc = _start(broker_factory, **{"odradek.fetch.memory.max.bytes": budget,
                                     "group.share.partition.max.record.locks": RECORDS})
    create_topic(proc.bootstrap, topic_name, PARTITIONS)
    _fill(proc.bootstrap, topic_name)
    with Wire(proc.bootstrap) as w:
        md = kio_call(w, K.METADATA, 12, {"topics": [{"name": topic_name, "topic_id": None}],
                                          "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
    topic_id = md.topics[0].topic_id
    groups = [_new_group(proc.bootstrap) for _ in range(STUCK + 1)]
    rss = RssSampler(proc.pid)
    stuck = []
    for i, group in enumerate(groups[:STUCK]):
        w = Wire(proc.bootstrap, timeout=30)
        w.send_request(K.SHARE_FETCH, 1, i, _share_fetch_body(group, topic_id),
                       header_version=2)
        stuck.append(w)
    seen: set[tuple[int, int]] = set()
    lock = threading.Lock()
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_read, daemon=True, args=(
        proc.bootstrap, groups[-1], topic_name, seen, lock, errors)) for _ in range(READERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    growth = rss.stop()
    assert not errors, errors[:3]
    assert proc.is_running()
    assert len(seen) == RECORDS
    held = _metric(proc, "odradek_fetch_memory_bytes")
    if budget > 0:
        assert 0 < held <= budget + 512 * 1024  # the budget and one batch
    waits = _metric(proc, "odradek_fetch_memory_waits")
    record_property("rss_growth_mib", growth / MiB)
    print(f"{STUCK} stuck share clients + {READERS} ShareConsumers, "
          f"{RECORDS * len(VALUE) / MiB:.0f} MiB topic, max_bytes 64 MiB, budget "
          f"{budget / MiB:.0f} MiB: peak RSS growth {growth / MiB:.1f} MiB, held "
          f"{held / MiB:.1f} MiB, {waits:.0f} fetches waited")
    for w in stuck:
        w.close()
    wait_until(lambda: _metric(proc, "odradek_fetch_memory_bytes") == 0, 10,
               desc="the fetch memory budget given back")
    if budget > 0:
        assert growth < 64 * MiB
