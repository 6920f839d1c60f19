import uuid

from odradek.metadata import records as R
from odradek.metadata.controller import Controller, NewTopic
from odradek.metadata.image import MetadataImage, apply


def _controller():
    return Controller(3, 1, lambda configs: "bad" if "bad.key" in configs else None)


def _image_with_broker():
    return apply(MetadataImage(), [R.register_broker_record(
        1, [{"listener": "PLAINTEXT", "host": "127.0.0.1", "port": 9092,
             "security_protocol": "PLAINTEXT"}], None)], 0)


def test_create_topic_records_build_the_image():
    c = _controller()
    image = _image_with_broker()
    results, records = c.create_topics(image, [NewTopic("t", -1, -1, {}, {"retention.ms": "5"})], False)
    assert results["t"].error_code == 0 and results["t"].num_partitions == 3
    new = apply(image, records, 5)
    topic = new.topics_by_name["t"]
    assert sorted(topic.partitions) == [0, 1, 2]
    assert topic.partitions[0].replicas == (1,) and topic.partitions[0].leader == 1
    assert new.topic_configs("t") == {"retention.ms": "5"}
    assert new.topics_by_id[topic.topic_id] is topic
    # the old image is untouched
    assert "t" not in image.topics_by_name


def test_create_topic_errors():
    c = _controller()
    image = _image_with_broker()
    _, records = c.create_topics(image, [NewTopic("t", 1, 1, {}, {})], False)
    image = apply(image, records, 1)
    cases = [
        (NewTopic("t", 1, 1, {}, {}), 36),
        (NewTopic("bad name", 1, 1, {}, {}), 17),
        (NewTopic("u", 0, 1, {}, {}), 37),
        (NewTopic("u", 1, 2, {}, {}), 38),
        (NewTopic("u", 1, 1, {}, {"bad.key": "1"}), 40),
    ]
    for topic, code in cases:
        results, recs = c.create_topics(image, [topic], False)
        assert results[topic.name].error_code == code, topic
        assert recs == []


def test_delete_topic_removes_it_and_its_configs():
    c = _controller()
    image = _image_with_broker()
    _, records = c.create_topics(image, [NewTopic("t", 1, 1, {}, {"retention.ms": "1"})], False)
    image = apply(image, records, 1)
    by_name, _, records = c.delete_topics(image, ["t", "nope"], [])
    assert by_name["t"].error_code == 0 and by_name["nope"].error_code == 3
    image = apply(image, records, 2)
    assert image.topics_by_name == {} and image.topic_configs("t") == {}


def test_incremental_alter_configs_set_delete_append():
    c = _controller()
    image = _image_with_broker()
    _, records = c.create_topics(image, [NewTopic("t", 1, 1, {}, {})], False)
    image = apply(image, records, 1)
    results, records = c.incremental_alter_configs(
        image, [(2, "t", [("retention.ms", 0, "10"), ("cleanup.policy", 2, "compact")])], False)
    assert results[0].error_code == 0
    image = apply(image, records, 2)
    assert image.topic_configs("t") == {"retention.ms": "10", "cleanup.policy": "compact"}
    results, records = c.incremental_alter_configs(image, [(2, "t", [("retention.ms", 1, None)])], False)
    image = apply(image, records, 3)
    assert image.topic_configs("t") == {"cleanup.policy": "compact"}
    results, _ = c.incremental_alter_configs(image, [(2, "nope", [])], False)
    assert results[0].error_code == 3


def test_create_partitions_grows_only():
    c = _controller()
    image = _image_with_broker()
    _, records = c.create_topics(image, [NewTopic("t", 2, 1, {}, {})], False)
    image = apply(image, records, 1)
    results, records = c.create_partitions(image, [("t", 1, None)], False)
    assert results["t"].error_code == 37 and records == []
    results, records = c.create_partitions(image, [("t", 5, None)], False)
    image = apply(image, records, 2)
    assert sorted(image.topics_by_name["t"].partitions) == [0, 1, 2, 3, 4]


def test_records_round_trip_json():
    rec = R.topic_record("a", str(uuid.uuid4()))
    assert R.decode(R.encode(rec)) == rec


def test_incremental_append_starts_from_the_default():
    c = Controller(1, 1, lambda configs: None, lambda name: "delete" if name == "cleanup.policy" else None)
    image = _image_with_broker()
    _, records = c.create_topics(image, [NewTopic("t", 1, 1, {}, {})], False)
    image = apply(image, records, 1)
    _, records = c.incremental_alter_configs(image, [(2, "t", [("cleanup.policy", 2, "compact")])], False)
    image = apply(image, records, 2)
    assert image.topic_configs("t") == {"cleanup.policy": "delete,compact"}


def test_more_than_ten_thousand_partitions_in_one_request_is_a_policy_violation():
    c = _controller()
    image = _image_with_broker()
    results, records = c.create_topics(
        image, [NewTopic("a", 6000, 1, {}, {}), NewTopic("b", 6000, 1, {}, {})], False)
    assert results["a"].error_code == 0
    assert results["b"].error_code == 44
    assert sum(1 for r in records if r["type"] == R.PARTITION) == 6000


def test_the_mutation_quota_admits_topic_by_topic():
    """KIP-599: the controller asks `admit(partitions)` per topic it would create,
    grow or delete; a refusal is THROTTLING_QUOTA_EXCEEDED for that topic only.
    validate_only requests are not counted."""
    from odradek.metadata.controller import THROTTLING_QUOTA_EXCEEDED

    c = _controller()
    image = _image_with_broker()
    asked: list[int] = []

    def admit(n: int) -> bool:
        asked.append(n)
        return len(asked) != 2

    topics = [NewTopic(f"t{i}", 3, 1, {}, {}) for i in range(3)]
    results, _ = c.create_topics(image, topics, True, admit)
    assert asked == [] and all(r.error_code == 0 for r in results.values())
    results, records = c.create_topics(image, topics, False, admit)
    assert [results[f"t{i}"].error_code for i in range(3)] == [0, THROTTLING_QUOTA_EXCEEDED, 0]
    assert results["t1"].error_message == "The throttling quota has been exceeded."
    assert asked == [3, 3, 3]
    image = apply(image, records, 1)
    asked.clear()
    grown, _ = c.create_partitions(image, [("t0", 5, None), ("t2", 4, None)], False, admit)
    assert (grown["t0"].error_code, grown["t2"].error_code) == (0, THROTTLING_QUOTA_EXCEEDED)
    assert asked == [2, 1]
    asked.clear()
    by_name, _, deleted = c.delete_topics(image, ["t0", "t2"], [], admit)
    assert (by_name["t0"].error_code, by_name["t2"].error_code) == (0, THROTTLING_QUOTA_EXCEEDED)
    assert asked == [3, 3] and len(deleted) == 1
