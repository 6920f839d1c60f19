"""Produce rules checked on raw requests: one batch per partition, acks values."""

from __future__ import annotations

import io
import struct

import pytest
from kio.serial import entity_reader, entity_writer

from odradek.protocol import api, entities
from odradek.protocol.records import Record, build_batch
from tests.integration.clients import Wire, assert_broker_serves, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


def _produce(w: Wire, topic: str, records: bytes, acks: int = 1):
    cls = api.request_class(api.ApiKey.PRODUCE, 9)
    buf = io.BytesIO()
    entity_writer(cls)(buf, entities.build(cls, {
        "transactional_id": None, "acks": acks, "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}))
    w.send_request(0, 9, 7, buf.getvalue(), header_version=2)
    frame = w.read_frame()
    assert frame is not None and struct.unpack_from(">i", frame)[0] == 7
    resp, _ = entity_reader(api.response_class(api.ApiKey.PRODUCE, 9))(frame, 5)
    return resp.responses[0].partition_responses[0]


def test_two_batches_in_one_partition_are_invalid_record(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    one = build_batch([Record(offset=0, timestamp=1, key=None, value=b"a")])
    with Wire(broker.bootstrap) as w:
        answer = _produce(w, topic_name, one + one)
        assert answer.error_code.value == 87
        assert "exactly one record batch" in answer.error_message
        ok = _produce(w, topic_name, one)
        assert ok.error_code.value == 0 and ok.base_offset == 0
    assert_broker_serves(broker.bootstrap)


def test_bad_acks_value_is_invalid_required_acks(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    one = build_batch([Record(offset=0, timestamp=1, key=None, value=b"a")])
    with Wire(broker.bootstrap) as w:
        assert _produce(w, topic_name, one, acks=2).error_code.value == 21
