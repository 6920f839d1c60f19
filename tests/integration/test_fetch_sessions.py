"""KIP-227 incremental fetch sessions on the wire."""

from __future__ import annotations

import io
import struct
from collections.abc import Sequence

import pytest
from kio.serial import entity_reader, entity_writer

from odradek.protocol import api, entities
from tests.integration.clients import Out, Wire, ck_produce, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

VERSION = 12  # names topics by name; v13+ by id


def fetch_request_v12(topic: str, parts: list[tuple[int, int]], session_id: int = 0,
                      epoch: int = -1, forgotten: Sequence[int] = (),
                      partition_max_bytes: int = 1 << 20) -> bytes:
    """The body of a Fetch v12 for (partition, offset) pairs of one topic."""
    cls = api.request_class(api.ApiKey.FETCH, VERSION)
    data = {
        "cluster_id": None, "replica_id": -1, "max_wait": 0, "min_bytes": 0,
        "max_bytes": max(1 << 20, partition_max_bytes), "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch, "rack_id": "",
        "topics": [{"topic": topic, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": off,
             "last_fetched_epoch": -1, "log_start_offset": -1,
             "partition_max_bytes": partition_max_bytes} for p, off in parts]}]
        if parts else [],
        "forgotten_topics_data": [{"topic": topic, "partitions": list(forgotten)}]
        if forgotten else [],
    }
    buf = io.BytesIO()
    entity_writer(cls)(buf, entities.build(cls, data))
    return buf.getvalue()


def _fetch(w: Wire, corr: int, topic: str, session_id: int, epoch: int,
           parts: list[tuple[int, int]], forgotten: Sequence[int] = ()) -> object:
    body = fetch_request_v12(topic, parts, session_id, epoch, forgotten)
    w.send_request(api.ApiKey.FETCH, VERSION, corr, body, header_version=2)
    frame = w.read_frame()
    assert frame is not None and struct.unpack_from(">i", frame)[0] == corr
    resp, _ = entity_reader(api.response_class(api.ApiKey.FETCH, VERSION))(frame, 5)
    return resp


def _parts(resp) -> dict[int, object]:
    return {p.partition_index: p for t in resp.responses for p in t.partitions}


def test_incremental_session_sends_only_news(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 3)
    ck_produce(broker.bootstrap, topic_name, [Out(value=b"a", partition=0)])
    with Wire(broker.bootstrap) as w:
        full = _fetch(w, 1, topic_name, 0, 0, [(0, 0), (1, 0), (2, 0)])
        assert full.error_code.value == 0
        sid = full.session_id
        assert sid != 0
        assert sorted(_parts(full)) == [0, 1, 2]
        assert _parts(full)[0].high_watermark == 1
        # nothing changed: an incremental fetch answers with no partitions
        quiet = _fetch(w, 2, topic_name, sid, 1, [(0, 1)])
        assert quiet.session_id == sid and _parts(quiet) == {}
        # new data on partition 2 only: only partition 2 is in the answer
        ck_produce(broker.bootstrap, topic_name, [Out(value=b"b", partition=2)])
        news = _fetch(w, 3, topic_name, sid, 2, [])
        assert sorted(_parts(news)) == [2]
        assert _parts(news)[2].high_watermark == 1 and len(_parts(news)[2].records) > 0
        # forget partition 2, move partition 2's data along: nothing for it any more
        ck_produce(broker.bootstrap, topic_name, [Out(value=b"c", partition=2)])
        after_forget = _fetch(w, 4, topic_name, sid, 3, [], forgotten=[2])
        assert 2 not in _parts(after_forget)
        # wrong epoch and unknown session are refused with Kafka's codes
        assert _fetch(w, 5, topic_name, sid, 99, []).error_code.value == 71
        assert _fetch(w, 6, topic_name, sid + 1, 1, []).error_code.value == 70
        # epoch -1 closes the session: a later incremental fetch finds nothing
        closed = _fetch(w, 7, topic_name, sid, -1, [(0, 0)])
        assert closed.session_id == 0 and sorted(_parts(closed)) == [0]
        assert _fetch(w, 8, topic_name, sid, 4, []).error_code.value == 70


def test_a_flood_of_new_sessions_leaves_the_cache_bounded_and_old_sessions_working(
        broker_factory, topic_name):
    """KIP-227 eviction: with every slot taken by recent sessions, new sessions
    get session id 0 (a sessionless full answer) and evict nobody."""
    proc = broker_factory(overrides={"max.incremental.fetch.session.cache.slots": 2})
    create_topic(proc.bootstrap, topic_name, 3)
    ck_produce(proc.bootstrap, topic_name, [Out(value=b"a", partition=0)])
    all_parts = [(0, 0), (1, 0), (2, 0)]
    with Wire(proc.bootstrap) as w1, Wire(proc.bootstrap) as w2:
        first, second = (_fetch(w, 1, topic_name, 0, 0, all_parts) for w in (w1, w2))
        assert first.session_id and second.session_id
        with Wire(proc.bootstrap) as flood:
            for corr in range(500):
                resp = _fetch(flood, corr, topic_name, 0, 0, all_parts)
                assert resp.error_code.value == 0 and resp.session_id == 0
                assert sorted(_parts(resp)) == [0, 1, 2]  # a full answer all the same
        for w, session in ((w1, first), (w2, second)):
            resp = _fetch(w, 2, topic_name, session.session_id, 1, [])
            assert resp.error_code.value == 0 and resp.session_id == session.session_id
