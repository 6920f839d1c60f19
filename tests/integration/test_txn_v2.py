"""Transactions v2 (KIP-890 part 2) with hand-built requests: the
transaction.version feature (UpdateFeatures, ApiVersions, `odradek features`),
EndTxn v5's epoch bump, Produce v12's and TxnOffsetCommit v5's implicit adds,
Produce v13's topic ids, and the old versions unchanged while TV2 is off."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest

from odradek.protocol import api
from tests.integration.txn_helpers import TXN_BROKER, call

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

NONE, INVALID_UPDATE_VERSION = 0, 95
TV = "transaction.version"
ELR = "eligible.leader.replicas.version"


def _features(bootstrap: str) -> tuple[dict[str, tuple[int, int]], dict[str, int], int]:
    r = call(bootstrap, api.ApiKey.API_VERSIONS, 3, {
        "client_software_name": "test", "client_software_version": "1"})
    assert r.error_code.value == NONE
    supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    finalized = {f.name: f.max_version_level for f in r.finalized_features}
    return supported, finalized, r.finalized_features_epoch


def _update(bootstrap: str, level: int, upgrade_type: int = 1, version: int = 1) -> Any:
    update: dict[str, Any] = {"feature": TV, "max_version_level": level}
    if version == 0:
        update["allow_downgrade"] = upgrade_type != 1
    else:
        update["upgrade_type"] = upgrade_type
    return call(bootstrap, api.ApiKey.UPDATE_FEATURES, version, {
        "timeout": 30000, "feature_updates": [update]})


def _features_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "features",
                           "--bootstrap-server", bootstrap, *args],
                          check=False, capture_output=True, text=True, timeout=60)


def enable_tv2(bootstrap: str) -> None:
    r = _update(bootstrap, 2)
    assert [x.error_code.value for x in r.results] == [NONE]
    assert _features(bootstrap)[1] == {TV: 2, ELR: 1}


def test_transaction_version_is_finalized_by_update_features_and_survives_restart(
        broker_factory):
    b = broker_factory(TXN_BROKER)
    supported, finalized, _ = _features(b.bootstrap)
    assert supported == {TV: (0, 2), ELR: (0, 1)}
    assert finalized == {ELR: 1}  # a new cluster: eligible leader replicas on (KIP-966)
    # out of range, unknown, or a downgrade without a downgrade type: refused, nothing changes
    assert _update(b.bootstrap, 3).results[0].error_code.value == INVALID_UPDATE_VERSION
    unknown = call(b.bootstrap, api.ApiKey.UPDATE_FEATURES, 2, {"feature_updates": [
        {"feature": "no.such.feature", "max_version_level": 1}]})
    assert unknown.error_code.value == INVALID_UPDATE_VERSION
    dry = _features_cli(b.bootstrap, "upgrade", "--feature", f"{TV}=2", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert _features(b.bootstrap)[1] == {ELR: 1}
    up = _features_cli(b.bootstrap, "upgrade", "--feature", f"{TV}=2")
    assert up.returncode == 0 and "upgraded to 2" in up.stdout, up.stderr
    _, finalized, epoch = _features(b.bootstrap)
    assert finalized == {TV: 2, ELR: 1} and epoch >= 0
    assert _update(b.bootstrap, 1).results[0].error_code.value == INVALID_UPDATE_VERSION
    b.restart()
    assert _features(b.bootstrap)[1] == {TV: 2, ELR: 1}
    described = _features_cli(b.bootstrap, "describe")
    assert described.returncode == 0, described.stderr
    assert f"Feature: {TV}\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\t" \
           "FinalizedVersionLevel: 2" in described.stdout
    down = _features_cli(b.bootstrap, "downgrade", "--feature", f"{TV}=1")
    assert down.returncode == 0, down.stderr
    assert _features(b.bootstrap)[1] == {TV: 1, ELR: 1}
    assert _update(b.bootstrap, 0, upgrade_type=2, version=0).results[0].error_code.value == NONE
    assert _features(b.bootstrap)[1] == {ELR: 1}


# -- EndTxn v5: the epoch bump -----------------------------------------------------------

TS = 1_700_000_000_000
INVALID_EPOCH, INVALID_TXN_STATE, PRODUCER_FENCED = 47, 48, 90
TRANSACTION_ABORTABLE = 120  # KIP-890: Produce v11+ instead of INVALID_TXN_STATE


def _init(bootstrap: str, tid: str) -> tuple[int, int]:
    r = call(bootstrap, api.ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": tid, "transaction_timeout": 60000,
        "producer_id": -1, "producer_epoch": -1})
    assert r.error_code.value == NONE
    return r.producer_id, r.producer_epoch


def _add(bootstrap: str, tid: str, pid: int, epoch: int, topic: str, partition: int = 0) -> int:
    r = call(bootstrap, api.ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [partition]}]})
    return r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code.value


def _produce(bootstrap: str, version: int, topic: str, tid: str, pid: int, epoch: int,
             seq: int, values: list[bytes], partition: int = 0) -> int:
    from odradek.protocol.records import Record, build_batch
    batch = build_batch([Record(offset=-1, timestamp=TS, value=v) for v in values],
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        is_transactional=True)
    r = call(bootstrap, api.ApiKey.PRODUCE, version, {
        "transactional_id": tid, "acks": -1, "timeout": 10000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": batch}]}]})
    return r.responses[0].partition_responses[0].error_code.value


def _end(bootstrap: str, version: int, tid: str, pid: int, epoch: int,
         commit: bool) -> tuple[int, int, int]:
    r = call(bootstrap, api.ApiKey.END_TXN, version, {
        "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
        "committed": commit})
    return r.error_code.value, getattr(r, "producer_id", -1), getattr(r, "producer_epoch", -1)


def test_end_txn_v5_bumps_the_epoch_and_read_committed_sees_only_the_commit(
        broker_factory, topic_name):
    from tests.integration.clients import create_topic
    from tests.integration.txn_helpers import read_values

    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 1)
    enable_tv2(b.bootstrap)
    tid = "tx-v2-bump"
    pid, epoch = _init(b.bootstrap, tid)
    assert _add(b.bootstrap, tid, pid, epoch, topic_name) == NONE
    assert _produce(b.bootstrap, 11, topic_name, tid, pid, epoch, 0, [b"c1", b"c2"]) == NONE
    assert _end(b.bootstrap, 5, tid, pid, epoch, True) == (NONE, pid, epoch + 1)
    assert _end(b.bootstrap, 5, tid, pid, epoch, True) == (NONE, pid, epoch + 1)  # a retry
    # the COMMIT marker carried epoch + 1: the old epoch is fenced on the partition
    assert _produce(b.bootstrap, 11, topic_name, tid, pid, epoch, 2, [b"late"]) == INVALID_EPOCH
    assert _end(b.bootstrap, 3, tid, pid, epoch, False)[0] == PRODUCER_FENCED
    assert _end(b.bootstrap, 1, tid, pid, epoch, False)[0] == INVALID_EPOCH
    # the next transaction uses the new epoch, sequence 0; it is aborted
    epoch += 1
    assert _add(b.bootstrap, tid, pid, epoch, topic_name) == NONE
    assert _produce(b.bootstrap, 11, topic_name, tid, pid, epoch, 0, [b"a1"]) == NONE
    assert _end(b.bootstrap, 5, tid, pid, epoch, False) == (NONE, pid, epoch + 1)
    assert read_values(b.bootstrap, topic_name, 1, "read_committed", expect=2) == [b"c1", b"c2"]
    assert sorted(read_values(b.bootstrap, topic_name, 1, "read_uncommitted", expect=3)) == [
        b"a1", b"c1", b"c2"]
    # the bumped epoch survives a coordinator restart
    b.restart()
    assert _end(b.bootstrap, 5, tid, pid, epoch + 1, False) == (NONE, pid, epoch + 2)


def test_without_transaction_version_2_end_txn_v5_does_not_bump(broker_factory, topic_name):
    from tests.integration.clients import create_topic

    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 1)
    tid = "tx-v1"
    pid, epoch = _init(b.bootstrap, tid)
    assert _add(b.bootstrap, tid, pid, epoch, topic_name) == NONE
    assert _produce(b.bootstrap, 11, topic_name, tid, pid, epoch, 0, [b"x"]) == NONE
    assert _end(b.bootstrap, 5, tid, pid, epoch, True) == (NONE, pid, epoch)
    assert _add(b.bootstrap, tid, pid, epoch, topic_name) == NONE  # same epoch goes on
    assert _produce(b.bootstrap, 11, topic_name, tid, pid, epoch, 1, [b"y"]) == NONE
    assert _end(b.bootstrap, 5, tid, pid, epoch, False) == (NONE, pid, epoch)


# -- Produce v12: partitions added implicitly ---------------------------------------------


def test_produce_v12_adds_partitions_to_the_transaction_itself(broker_factory, topic_name):
    from tests.integration.clients import create_topic
    from tests.integration.txn_helpers import read_values

    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 2)
    tid = "tx-v2-implicit"
    pid, epoch = _init(b.bootstrap, tid)
    # transaction.version 0: Produce v12 is verified as v11 is (KIP-890 part 1); v10
    # cannot carry TRANSACTION_ABORTABLE
    assert _produce(b.bootstrap, 12, topic_name, tid, pid, epoch, 0, [b"no"]) == \
        TRANSACTION_ABORTABLE
    assert _produce(b.bootstrap, 10, topic_name, tid, pid, epoch, 0, [b"no"]) == \
        INVALID_TXN_STATE
    enable_tv2(b.bootstrap)
    # v11 still needs AddPartitionsToTxn; v12 adds the partition itself
    assert _produce(b.bootstrap, 11, topic_name, tid, pid, epoch, 0, [b"no"]) == \
        TRANSACTION_ABORTABLE
    assert _produce(b.bootstrap, 12, topic_name, tid, pid, epoch, 0, [b"c0"], 0) == NONE
    assert _produce(b.bootstrap, 12, topic_name, tid, pid, epoch, 0, [b"c1"], 1) == NONE
    assert _produce(b.bootstrap, 12, topic_name, tid, pid, epoch, 1, [b"c2"], 1) == NONE
    described = call(b.bootstrap, api.ApiKey.DESCRIBE_TRANSACTIONS, 0, {
        "transactional_ids": [tid]}).transaction_states[0]
    assert described.transaction_state == "Ongoing"
    assert [(t.topic, sorted(t.partitions)) for t in described.topics] == [(topic_name, [0, 1])]
    assert _end(b.bootstrap, 5, tid, pid, epoch, True) == (NONE, pid, epoch + 1)
    # the old epoch cannot open a new transaction; the new one can, and aborts it
    assert _produce(b.bootstrap, 12, topic_name, tid, pid, epoch, 2, [b"x"], 0) == INVALID_EPOCH
    assert _produce(b.bootstrap, 12, topic_name, tid, pid, epoch + 1, 0, [b"a0"], 0) == NONE
    assert _end(b.bootstrap, 5, tid, pid, epoch + 1, False) == (NONE, pid, epoch + 2)
    assert sorted(read_values(b.bootstrap, topic_name, 2, "read_committed", expect=3)) == [
        b"c0", b"c1", b"c2"]


# -- TxnOffsetCommit v5: the group's partition added implicitly -----------------------------


def _commit_offset(bootstrap: str, version: int, tid: str, group: str, pid: int, epoch: int,
                   topic: str, offset: int) -> int:
    r = call(bootstrap, api.ApiKey.TXN_OFFSET_COMMIT, version, {
        "transactional_id": tid, "group_id": group, "producer_id": pid,
        "producer_epoch": epoch, "generation_id": -1, "member_id": "",
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]})
    return r.topics[0].partitions[0].error_code.value


def _committed(bootstrap: str, group: str, topic: str) -> int:
    r = call(bootstrap, api.ApiKey.OFFSET_FETCH, 7, {
        "group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}],
        "require_stable": True})
    return r.topics[0].partitions[0].committed_offset


def test_txn_offset_commit_v5_adds_the_groups_partition_itself(broker_factory, topic_name):
    from tests.integration.clients import create_topic

    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 1)
    tid, group = "tx-v2-offsets", f"g-{topic_name}"
    pid, epoch = _init(b.bootstrap, tid)
    # transaction.version 0: v5 still needs AddOffsetsToTxn (the first calls may
    # find the group coordinator loading its new partitions)
    deadline = time.monotonic() + 30
    while (code := _commit_offset(b.bootstrap, 5, tid, group, pid, epoch, topic_name, 7)) in (
            14, 15, 16) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert code == TRANSACTION_ABORTABLE  # v4+ carry it; v3 and below: INVALID_TXN_STATE
    assert _commit_offset(b.bootstrap, 3, tid, group, pid, epoch, topic_name, 7) == \
        INVALID_TXN_STATE
    enable_tv2(b.bootstrap)
    assert _commit_offset(b.bootstrap, 3, tid, group, pid, epoch, topic_name, 7) == \
        INVALID_TXN_STATE
    assert _commit_offset(b.bootstrap, 5, tid, group, pid, epoch, topic_name, 7) == NONE
    assert _end(b.bootstrap, 5, tid, pid, epoch, True) == (NONE, pid, epoch + 1)
    assert _committed(b.bootstrap, group, topic_name) == 7
    # an aborted one leaves the committed offset as it was
    assert _commit_offset(b.bootstrap, 5, tid, group, pid, epoch + 1, topic_name, 9) == NONE
    assert _end(b.bootstrap, 5, tid, pid, epoch + 1, False) == (NONE, pid, epoch + 2)
    assert _committed(b.bootstrap, group, topic_name) == 7
    # the fenced epoch is refused (TxnOffsetCommit never carries PRODUCER_FENCED)
    assert _commit_offset(b.bootstrap, 5, tid, group, pid, epoch, topic_name, 9) == INVALID_EPOCH


# -- Produce v13: topics by id (KIP-516) ----------------------------------------------------


def test_produce_v13_names_topics_by_id_in_a_v2_transaction(broker_factory, topic_name):
    import uuid

    from odradek.protocol.records import Record, build_batch
    from tests.integration.clients import create_topic
    from tests.integration.txn_helpers import read_values

    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 1)
    enable_tv2(b.bootstrap)
    meta = call(b.bootstrap, api.ApiKey.METADATA, 12, {
        "topics": [{"name": topic_name, "topic_id": None}],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    topic_id = meta.topics[0].topic_id
    tid = "tx-v13"
    pid, epoch = _init(b.bootstrap, tid)

    def produce(tids: list[uuid.UUID], seq: int, value: bytes) -> Any:
        batch = build_batch([Record(offset=-1, timestamp=TS, value=value)], producer_id=pid,
                            producer_epoch=epoch, base_sequence=seq, is_transactional=True)
        return call(b.bootstrap, api.ApiKey.PRODUCE, 13, {
            "transactional_id": tid, "acks": -1, "timeout": 10000,
            "topic_data": [{"topic_id": t, "partition_data": [{"index": 0, "records": batch}]}
                           for t in tids]})

    r = produce([topic_id], 0, b"by-id")
    (topic,) = r.responses
    assert topic.topic_id == topic_id
    assert (topic.partition_responses[0].error_code.value,
            topic.partition_responses[0].base_offset) == (NONE, 0)
    unknown = uuid.uuid4()
    r = produce([unknown], 1, b"nowhere")
    assert r.responses[0].topic_id == unknown
    assert r.responses[0].partition_responses[0].error_code.value == 100  # UNKNOWN_TOPIC_ID
    assert _end(b.bootstrap, 5, tid, pid, epoch, True) == (NONE, pid, epoch + 1)
    assert read_values(b.bootstrap, topic_name, 1, "read_committed", expect=1) == [b"by-id"]


def test_a_transaction_version_1_client_works_unchanged_on_a_tv2_cluster(
        broker_factory, topic_name):
    """confluent-kafka (librdkafka) speaks transactions v1: AddPartitionsToTxn,
    EndTxn below v5. On a cluster at transaction.version 2 it commits and aborts
    as before, and its epoch is not bumped under it."""
    from tests.integration.clients import create_topic
    from tests.integration.txn_helpers import read_values, txn_producer

    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 2)
    enable_tv2(b.bootstrap)
    p = txn_producer(b.bootstrap, "tx-v1-client")
    for round_ in range(2):
        p.begin_transaction()
        for i in range(4):
            p.produce(topic_name, value=b"c%d-%d" % (round_, i), partition=i % 2)
        p.commit_transaction(30)
        p.begin_transaction()
        p.produce(topic_name, value=b"aborted", partition=0)
        p.flush(30)
        p.abort_transaction(30)
    got = read_values(b.bootstrap, topic_name, 2, "read_committed", expect=8)
    assert sorted(got) == sorted(b"c%d-%d" % (r, i) for r in range(2) for i in range(4))


# -- InitProducerId v6: two-phase commit (KIP-939) ------------------------------------------


def test_init_producer_id_v6_refuses_two_phase_commit_as_kafka_with_it_disabled(broker_factory):
    """Kafka's default transaction.two.phase.commit.enable=false: enable2Pc gets
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED, keepPreparedTxn INVALID_REQUEST; without
    them v6 answers as v5, with no ongoing transaction (-1, -1)."""
    b = broker_factory(TXN_BROKER)

    def init(tid: str, **flags: bool) -> Any:
        return call(b.bootstrap, api.ApiKey.INIT_PRODUCER_ID, 6, {
            "transactional_id": tid, "transaction_timeout": 60000,
            "producer_id": -1, "producer_epoch": -1, **flags})

    assert init("tx-2pc", enable2_pc=True).error_code.value == 53
    assert init("tx-2pc", keep_prepared_txn=True).error_code.value == 42
    r = init("tx-2pc")
    assert r.error_code.value == NONE and r.producer_id >= 0 and r.producer_epoch == 0
    assert (r.ongoing_txn_producer_id, r.ongoing_txn_producer_epoch) == (-1, -1)


# -- WriteTxnMarkers v2: the marker's transaction version -------------------------------------


def test_write_txn_markers_v2_with_transaction_version_2_needs_an_epoch_above_the_producers(
        broker_factory, topic_name):
    """As Kafka 4's leader: a v2 marker with transaction version 2 (the coordinator
    bumped the epoch at the transaction's end) is refused with INVALID_PRODUCER_EPOCH
    unless its epoch is above the producer's; version 0/1 (and v1) only refuses an
    older one."""
    from odradek.protocol.records import Record, build_batch
    from tests.integration.clients import create_topic

    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 1)
    r = call(b.bootstrap, api.ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": None, "transaction_timeout": 60000,
        "producer_id": -1, "producer_epoch": -1})
    pid, epoch = r.producer_id, r.producer_epoch
    batch = build_batch([Record(offset=-1, timestamp=TS, value=b"x")],
                        producer_id=pid, producer_epoch=epoch, base_sequence=0)
    produced = call(b.bootstrap, api.ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": -1, "timeout": 10000,
        "topic_data": [{"name": topic_name, "partition_data": [
            {"index": 0, "records": batch}]}]})
    assert produced.responses[0].partition_responses[0].error_code.value == NONE

    def marker(version: int, marker_epoch: int, **tv: int) -> int:
        resp = call(b.bootstrap, api.ApiKey.WRITE_TXN_MARKERS, version, {"markers": [{
            "producer_id": pid, "producer_epoch": marker_epoch, "transaction_result": False,
            "topics": [{"name": topic_name, "partition_indexes": [0]}],
            "coordinator_epoch": 0, **tv}]})
        return resp.markers[0].topics[0].partitions[0].error_code.value

    assert marker(2, epoch, transaction_version=2) == INVALID_EPOCH
    assert marker(2, epoch, transaction_version=1) == NONE
    assert marker(1, epoch) == NONE
    assert marker(2, epoch + 1, transaction_version=2) == NONE
    assert marker(1, epoch) == INVALID_EPOCH  # now older than the producer's
