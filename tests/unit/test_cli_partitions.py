"""`odradek partitions reassign` without a broker: the reassignment file and
the throttle configs it sets, as kafka-reassign-partitions.sh does."""

from __future__ import annotations

import pytest

from odradek.cli.partitions import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    UsageError,
    _throttle_configs,
    parse_reassignment_json,
)

DUPLICATED = (
    '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
    '{"topic":"t","partition":0,"replicas":[2]}]}'
)


def test_kafkas_reassignment_json_is_read_into_targets() -> None:
    text = (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3],'
        '"log_dirs":["any","any"]},{"topic":"t","partition":1,"replicas":[1]}]}'
    )
    assert parse_reassignment_json(text) == {("t", 0): [2, 3], ("t", 1): [1]}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not json", "not JSON"),
        ('{"version":2,"partitions":[]}', '"version":1'),
        ('{"version":1,"partitions":[]}', "no partitions"),
        (
            '{"version":1,"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}',
            "needs topic, partition, replicas",
        ),
        (
            DUPLICATED,
            "more than once",
        ),
    ],
)
def test_a_bad_reassignment_file_is_refused_with_a_reason(text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        parse_reassignment_json(text)


def test_the_throttle_names_current_replicas_as_leaders_and_new_ones_as_followers() -> None:
    targets = {("t", 0): [2, 3], ("t", 1): [1, 2]}
    current = {("t", 0): [1, 2], ("t", 1): [1, 2]}  # partition 1 does not move
    configs = _throttle_configs(targets, current, 1000)
    assert configs == [
        (RESOURCE_TOPIC, "t", {LEADER_REPLICAS: "0:1,0:2", FOLLOWER_REPLICAS: "0:3"}),
        *[
            (RESOURCE_BROKER, str(b), {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"})
            for b in (1, 2, 3)
        ],
    ]
    removed = _throttle_configs(targets, current, None)
    assert removed[0] == (RESOURCE_TOPIC, "t", {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None})
