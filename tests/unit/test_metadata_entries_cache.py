"""Metadata's partition entries are built once per metadata image and topic, and
follow every change of the image (a new leader, a fenced broker)."""

from __future__ import annotations

from odradek.broker.handlers.metadata import partition_entries
from odradek.metadata import records as R
from tests.unit.test_cluster_control import _cluster, _control, _step, _topic


def test_entries_are_reused_within_an_image_and_rebuilt_when_it_changes() -> None:
    control = _control()
    image = _topic(_cluster(control), "t", 3, 3)
    topic = image.topics_by_name["t"]
    first = partition_entries(topic, image)
    assert partition_entries(topic, image) is first  # one image: built once
    assert [e["offline_replicas"] for e in first] == [[], [], []]
    # broker 1 fenced: its leaderships move and it is an offline replica everywhere
    fenced = _step(image, [R.broker_registration_change_record(1, fenced=True)]
                   + control._leave(image, 1))
    after = partition_entries(fenced.topics_by_name["t"], fenced)
    assert after is not first
    for e in after:
        assert e["leader_id"] != 1 and 1 not in e["isr_nodes"]
        assert e["offline_replicas"] == [1]
    # the topic unchanged, the brokers changed: the entries still follow the image
    same_topic = _step(fenced, [R.broker_registration_change_record(2, fenced=True)])
    assert same_topic.topics_by_name["t"] is fenced.topics_by_name["t"]
    assert all(2 in e["offline_replicas"] for e in
               partition_entries(same_topic.topics_by_name["t"], same_topic))
    # no image (the caller has none): built each time, no replica offline
    assert partition_entries(topic, None) == partition_entries(topic, None)
