"""Replication throttles: the token bucket, which partitions a list throttles,
where the rate comes from, and the dynamic broker config rules."""

from __future__ import annotations

import uuid

from odradek.configdef import LONG_MAX
from odradek.metadata import records as R
from odradek.metadata.image import MetadataImage, apply
from odradek.replication.quota import (
    ALL,
    FOLLOWER,
    LEADER,
    ReplicationQuota,
    TokenBucket,
    throttled_partitions,
)
from odradek.topic_config import validate_dynamic_broker_configs


def test_the_bucket_refills_at_the_rate_and_saves_up_at_most_one_second() -> None:
    bucket = TokenBucket(1000, now_s=0.0)
    assert bucket.available(0.0) == 1000
    bucket.consume(1000, 0.0)
    assert bucket.available(0.0) == 0
    assert bucket.available(0.25) == 250
    assert bucket.available(60.0) == 1000  # idle time does not pile up


def test_one_read_may_overdraw_and_then_nothing_moves_until_the_debt_is_paid() -> None:
    bucket = TokenBucket(1000, now_s=0.0)
    bucket.consume(3000, 0.0)  # a whole batch larger than the bucket
    assert bucket.available(1.0) == 0
    assert abs(bucket.seconds_until_available(1.0) - 1.001) < 1e-9
    assert bucket.available(2.5) == 500


def test_throttled_replica_lists_pick_this_brokers_partitions() -> None:
    assert throttled_partitions("0:101,1:102,2:101", 101) == frozenset({0, 2})
    assert throttled_partitions("0:101,1:102", 103) == frozenset()
    assert throttled_partitions("*", 7) is ALL


def _image(*records: R.MetadataRecord) -> MetadataImage:
    tid = str(uuid.uuid4())
    base = [R.topic_record("t", tid), R.partition_record(tid, 0, [1], 1)]
    return apply(MetadataImage(), [*base, *records], 10)


def test_the_rate_is_the_brokers_dynamic_value_then_the_cluster_default_then_static() -> None:
    quota = ReplicationQuota(LEADER, 1, static_rate_bytes_per_s=LONG_MAX)
    key = "leader.replication.throttled.rate"
    assert quota.rate(_image()) == LONG_MAX
    assert quota.rate(_image(R.config_record(R.RESOURCE_BROKER, "", key, "500"))) == 500
    both = _image(
        R.config_record(R.RESOURCE_BROKER, "", key, "500"),
        R.config_record(R.RESOURCE_BROKER, "1", key, "200"),
    )
    assert quota.rate(both) == 200
    other = _image(R.config_record(R.RESOURCE_BROKER, "2", key, "200"))
    assert quota.rate(other) == LONG_MAX


def test_a_partition_is_throttled_only_when_listed_and_a_rate_is_set() -> None:
    quota = ReplicationQuota(FOLLOWER, 1, static_rate_bytes_per_s=LONG_MAX)
    listed = R.config_record(
        R.RESOURCE_TOPIC, "t", "follower.replication.throttled.replicas", "0:1"
    )
    rate = R.config_record(R.RESOURCE_BROKER, "1", "follower.replication.throttled.rate", "10")
    assert not quota.is_throttled(_image(listed), "t", 0)  # no rate: unthrottled
    assert not quota.is_throttled(_image(rate), "t", 0)  # not listed
    assert quota.is_throttled(_image(listed, rate), "t", 0)
    assert not quota.is_throttled(_image(listed, rate), "t", 1)


def test_only_the_throttle_rates_are_dynamic_broker_configs() -> None:
    assert validate_dynamic_broker_configs({"leader.replication.throttled.rate": "1000"}) is None
    assert "dynamically" in (validate_dynamic_broker_configs({"num.partitions": "3"}) or "")
    assert validate_dynamic_broker_configs({"follower.replication.throttled.rate": "-1"})
    assert validate_dynamic_broker_configs({"follower.replication.throttled.rate": "x"})
