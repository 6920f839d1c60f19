"""Error codes a version cannot carry (broker/version_errors.py and the API table)."""

from __future__ import annotations

from odradek.broker.apis import API_TABLE
from odradek.broker.version_errors import downgrade
from odradek.protocol import api

K = api.ApiKey


def _answer(code: int) -> dict:
    return {"error_code": code, "results_by_topic_v3_and_below": [
        {"name": "t", "results_by_partition": [
            {"partition_index": 0, "partition_error_code": code}]}]}


def _rewritten(key: int, version: int, data: dict) -> dict:
    downgrade(API_TABLE[key].older_errors, version, data)
    return data


def test_producer_fenced_becomes_invalid_producer_epoch_below_kip_588_versions():
    for key, first in ((K.ADD_PARTITIONS_TO_TXN, 2), (K.END_TXN, 2),
                       (K.ADD_OFFSETS_TO_TXN, 2), (K.INIT_PRODUCER_ID, 4)):
        old = _rewritten(key, first - 1, _answer(90))
        assert old["error_code"] == 47
        assert old["results_by_topic_v3_and_below"][0]["results_by_partition"][0][
            "partition_error_code"] == 47
        assert _rewritten(key, first, _answer(90)) == _answer(90)
    # never carried (Produce: mapped where the verification answer comes in)
    key = K.TXN_OFFSET_COMMIT
    assert _rewritten(key, api.SUPPORTED_VERSIONS[key][1], _answer(90))["error_code"] == 47
    assert not API_TABLE[K.PRODUCE].older_errors  # the hot path walks nothing


def test_other_version_dependent_codes():
    assert _rewritten(K.FETCH, 5, {"responses": [{"partitions": [
        {"error_code": 56}]}]})["responses"][0]["partitions"][0]["error_code"] == 6
    assert _rewritten(K.FETCH, 6, {"error_code": 56})["error_code"] == 56
    assert _rewritten(K.DELETE_TOPICS, 2, {"responses": [{"error_code": 73}]}) == {
        "responses": [{"error_code": 42}]}
    assert _rewritten(K.DELETE_TOPICS, 3, {"responses": [{"error_code": 73}]}) == {
        "responses": [{"error_code": 73}]}
    assert _rewritten(K.LIST_OFFSETS, 4, {"error_code": 78})["error_code"] == 5
    # KIP-890's TRANSACTION_ABORTABLE (120): AddPartitionsToTxn v5, TxnOffsetCommit v4
    assert _rewritten(K.ADD_PARTITIONS_TO_TXN, 4, {"error_code": 120})["error_code"] == 48
    assert _rewritten(K.ADD_PARTITIONS_TO_TXN, 5, {"error_code": 120})["error_code"] == 120
    assert _rewritten(K.TXN_OFFSET_COMMIT, 3, {"error_code": 120})["error_code"] == 48
    assert _rewritten(K.TXN_OFFSET_COMMIT, 4, {"error_code": 120})["error_code"] == 120
    # other codes and fields are left alone
    assert _rewritten(K.END_TXN, 0, {"error_code": 48, "note": 90}) == {
        "error_code": 48, "note": 90}


def test_every_rule_names_a_code_the_api_served_versions_reach():
    for spec in API_TABLE.values():
        for rule in spec.older_errors:
            lo, _hi = api.SUPPORTED_VERSIONS[spec.key]
            assert rule.since > lo, (spec.name, rule)  # some served version needs it
