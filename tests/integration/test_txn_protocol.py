"""The broker's answers on the error paths of idempotence and transactions, with
hand-built requests (no client library hides or retries them)."""

from __future__ import annotations

import pytest

from odradek.protocol import api
from odradek.protocol.records import Record, build_batch
from tests.integration.clients import create_topic, watermarks
from tests.integration.txn_helpers import TXN_BROKER, call

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

NONE, OUT_OF_ORDER, INVALID_EPOCH, INVALID_TXN_STATE, PRODUCER_FENCED = 0, 45, 47, 48, 90
TS = 1_700_000_000_000


def _init(bootstrap: str, tid: str | None) -> tuple[int, int]:
    r = call(bootstrap, api.ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": tid, "transaction_timeout": 60000,
        "producer_id": -1, "producer_epoch": -1})
    assert r.error_code.value == 0
    return r.producer_id, r.producer_epoch


def _produce(bootstrap: str, topic: str, pid: int, epoch: int, seq: int, n: int = 1,
             tid: str | None = None) -> tuple[int, int]:
    batch = build_batch([Record(offset=-1, timestamp=TS, value=b"v%d" % i) for i in range(n)],
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        is_transactional=tid is not None)
    r = call(bootstrap, api.ApiKey.PRODUCE, 9, {
        "transactional_id": tid, "acks": -1, "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    p = r.responses[0].partition_responses[0]
    return p.error_code.value, p.base_offset


def test_duplicate_is_acknowledged_with_its_offset_and_a_gap_is_out_of_order(
        broker_factory, topic_name):
    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 1)
    pid, epoch = _init(b.bootstrap, None)
    assert _produce(b.bootstrap, topic_name, pid, epoch, 0, 3) == (NONE, 0)
    assert _produce(b.bootstrap, topic_name, pid, epoch, 3, 2) == (NONE, 3)
    assert _produce(b.bootstrap, topic_name, pid, epoch, 0, 3) == (NONE, 0)  # a retry
    assert watermarks(b.bootstrap, topic_name, 0)[1] == 5  # not written again
    assert _produce(b.bootstrap, topic_name, pid, epoch, 9)[0] == OUT_OF_ORDER
    assert _produce(b.bootstrap, topic_name, pid, epoch + 1, 4)[0] == OUT_OF_ORDER  # new epoch: 0
    assert _produce(b.bootstrap, topic_name, pid, epoch + 1, 0) == (NONE, 5)
    assert _produce(b.bootstrap, topic_name, pid, epoch, 5)[0] == INVALID_EPOCH
    # the producer state survives a restart (snapshot at clean shutdown) ...
    b.restart()
    assert _produce(b.bootstrap, topic_name, pid, epoch + 1, 0) == (NONE, 5)
    # ... and a crash (rebuilt from the last snapshot plus the log)
    assert _produce(b.bootstrap, topic_name, pid, epoch + 1, 1) == (NONE, 6)
    b.restart(hard=True)
    assert _produce(b.bootstrap, topic_name, pid, epoch + 1, 1) == (NONE, 6)
    assert _produce(b.bootstrap, topic_name, pid, epoch + 1, 3)[0] == OUT_OF_ORDER


def test_transactional_produce_outside_the_txn_is_rejected_and_fenced_epochs_too(
        broker_factory, topic_name):
    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 1)
    tid = "tx-raw"
    pid, epoch = _init(b.bootstrap, tid)
    # KIP-890 part 1: the partition was never added to the transaction
    assert _produce(b.bootstrap, topic_name, pid, epoch, 0, tid=tid)[0] == INVALID_TXN_STATE
    add = call(b.bootstrap, api.ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic_name, "partitions": [0]}]})
    assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code \
        .value == NONE
    assert _produce(b.bootstrap, topic_name, pid, epoch, 0, tid=tid) == (NONE, 0)
    # a second InitProducerId fences the first: its open txn is aborted
    pid2, epoch2 = _init(b.bootstrap, tid)
    assert (pid2, epoch2) == (pid, epoch + 2)
    assert _produce(b.bootstrap, topic_name, pid, epoch, 1, tid=tid)[0] == INVALID_EPOCH
    again = call(b.bootstrap, api.ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic_name, "partitions": [0]}]})
    assert again.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code \
        .value == PRODUCER_FENCED
    end = call(b.bootstrap, api.ApiKey.END_TXN, 3, {
        "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": True})
    assert end.error_code.value == PRODUCER_FENCED
    # the ABORT marker (epoch + 1) took offset 1; nothing is left open
    assert watermarks(b.bootstrap, topic_name, 0)[1] == 2
    producers = call(b.bootstrap, api.ApiKey.DESCRIBE_PRODUCERS, 0, {
        "topics": [{"name": topic_name, "partition_indexes": [0]}]})
    (state,) = producers.topics[0].partitions[0].active_producers
    assert (state.producer_id, state.producer_epoch, state.current_txn_start_offset) == (
        pid, epoch + 1, -1)


def _add_partitions(bootstrap: str, version: int, tid: str, pid: int, epoch: int,
                    topic: str) -> int:
    r = call(bootstrap, api.ApiKey.ADD_PARTITIONS_TO_TXN, version, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
    return r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code.value


@pytest.mark.parametrize("old,new", [(0, 2), (1, 3)])
def test_a_fenced_producer_gets_the_error_its_version_knows(broker_factory, topic_name,
                                                            old, new):
    """KIP-588: PRODUCER_FENCED (90) only from AddPartitionsToTxn/AddOffsetsToTxn/EndTxn
    v2 and InitProducerId v4; older versions answer INVALID_PRODUCER_EPOCH (47), as
    Kafka's KafkaApis does, since their clients do not know 90."""
    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 1)
    tid = f"tx-fenced-{old}"
    pid, epoch = _init(b.bootstrap, tid)
    assert _init(b.bootstrap, tid) == (pid, epoch + 1)  # the first producer is fenced
    assert _add_partitions(b.bootstrap, old, tid, pid, epoch, topic_name) == INVALID_EPOCH
    assert _add_partitions(b.bootstrap, new, tid, pid, epoch, topic_name) == PRODUCER_FENCED
    for version, code in ((old, INVALID_EPOCH), (new, PRODUCER_FENCED)):
        end = call(b.bootstrap, api.ApiKey.END_TXN, version, {
            "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
            "committed": True})
        assert end.error_code.value == code
        offsets = call(b.bootstrap, api.ApiKey.ADD_OFFSETS_TO_TXN, version, {
            "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
            "group_id": "g-fenced"})
        assert offsets.error_code.value == code
    # InitProducerId with the fenced (pid, epoch): PRODUCER_FENCED from v4 only
    for version, code in ((3, INVALID_EPOCH), (4, PRODUCER_FENCED)):
        init = call(b.bootstrap, api.ApiKey.INIT_PRODUCER_ID, version, {
            "transactional_id": tid, "transaction_timeout": 60000,
            "producer_id": pid, "producer_epoch": epoch})
        assert init.error_code.value == code
    # TxnOffsetCommit never carries PRODUCER_FENCED
    for version in (0, 3):
        commit = call(b.bootstrap, api.ApiKey.TXN_OFFSET_COMMIT, version, {
            "transactional_id": tid, "group_id": "g-fenced", "producer_id": pid,
            "producer_epoch": epoch, "topics": [{"name": topic_name, "partitions": [
                {"partition_index": 0, "committed_offset": 0,
                 "committed_metadata": ""}]}]})
        assert commit.topics[0].partitions[0].error_code.value != PRODUCER_FENCED
