"""Finalized feature levels: UpdateFeatures' rules, the FeatureLevelRecord in
the image, and a snapshot (records_of) that keeps them."""

from __future__ import annotations

from odradek.metadata import features as F
from odradek.metadata import records as R
from odradek.metadata.image import MetadataImage, apply, records_of

TV = F.TRANSACTION_VERSION


def _codes(results):
    return [r.error_code for r in results]


def test_upgrade_downgrade_and_removal_follow_kafkas_rules():
    results, records = F.update({}, [F.Update(TV, 2)])
    assert _codes(results) == [F.NONE]
    image = apply(MetadataImage(), records, 3)
    assert image.features == {TV: 2} and image.feature_level(TV) == 2
    # lowering needs a downgrade type; raising refuses one; out of range; unknown
    for update in (F.Update(TV, 1), F.Update(TV, 3), F.Update("no.such", 1)):
        results, records = F.update(image.features, [update])
        assert _codes(results) == [F.INVALID_UPDATE_VERSION] and records == []
    assert _codes(F.update({}, [F.Update(TV, 2, F.SAFE_DOWNGRADE)])[0]) == [
        F.INVALID_UPDATE_VERSION]
    # one bad update: nothing changes
    results, records = F.update(image.features, [F.Update(TV, 1, F.SAFE_DOWNGRADE),
                                                 F.Update("no.such", 1)])
    assert _codes(results) == [F.NONE, F.INVALID_UPDATE_VERSION] and records == []
    results, records = F.update(image.features, [F.Update(TV, 0, F.UNSAFE_DOWNGRADE)])
    assert _codes(results) == [F.NONE]
    assert apply(image, records, 4).features == {}
    # the same level again writes nothing
    assert F.update(image.features, [F.Update(TV, 2)]) == ([F.Result(TV)], [])


def test_a_snapshot_keeps_the_levels():
    image = apply(MetadataImage(), F.update({}, [F.Update(TV, 2)])[1], 0)
    assert apply(MetadataImage(), records_of(image), 0).features == {TV: 2}


def test_a_new_cluster_starts_with_eligible_leader_replicas_and_a_cluster_min_isr():
    ELR = F.ELIGIBLE_LEADER_REPLICAS_VERSION
    records = F.new_cluster_records([], 2)
    image = apply(MetadataImage(), records, 0)
    assert image.features == {ELR: 1}
    assert image.configs[(R.RESOURCE_BROKER, "")] == {"min.insync.replicas": "2"}
    # `storage format --feature eligible.leader.replicas.version=0`: left off
    off = [R.feature_level_record(ELR, 0)]
    assert F.new_cluster_records(off, 2) == off
    # a bootstrap that sets the cluster value and a broker override (Kafka drops it)
    bootstrap = [R.config_record(R.RESOURCE_BROKER, "", "min.insync.replicas", "3"),
                 R.config_record(R.RESOURCE_BROKER, "1", "min.insync.replicas", "1"),
                 R.feature_level_record(TV, 2)]
    image = apply(MetadataImage(), F.new_cluster_records(bootstrap, 2), 0)
    assert image.features == {ELR: 1, TV: 2}
    assert image.configs[(R.RESOURCE_BROKER, "")] == {"min.insync.replicas": "3"}
    assert image.configs.get((R.RESOURCE_BROKER, "1"), {}) == {}
