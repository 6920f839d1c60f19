"""Finalized feature levels: UpdateFeatures' rules, the FeatureLevelRecord in
the image, and a snapshot (records_of) that keeps them."""

from __future__ import annotations

from odradek.metadata import features as F
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
