"""Partition reassignment (KIP-455) on the controller, as pure state transitions:
the merged replica list, completion by AlterPartition, leader moves, cancel,
and Kafka's error codes."""

from __future__ import annotations

import random

from odradek.metadata import reassignment
from odradek.metadata import records as R
from odradek.metadata.cluster_control import ClusterControl
from odradek.metadata.controller import Controller, NewTopic
from odradek.metadata.image import MetadataImage, PartitionImage

from .test_cluster_control import _cluster, _control, _part, _step


def _placed(image: MetadataImage, name: str, replicas: list[int]) -> MetadataImage:
    controller = Controller(1, 1, lambda configs: None, rng=random.Random(1))
    results, recs = controller.create_topics(
        image, [NewTopic(name, -1, -1, {0: replicas}, {})], False
    )
    assert results[name].error_code == 0, results[name]
    return _step(image, recs)


def _never_unclean(image: MetadataImage, topic: str) -> bool:
    return False


def _reassign(
    image: MetadataImage,
    target: list[int] | None,
    name: str = "t",
    partition: int = 0,
    **kw: object,
) -> tuple[int, MetadataImage]:
    outcomes, recs = reassignment.alter(image, [(name, partition, target)], _never_unclean, **kw)  # type: ignore[arg-type]
    assert len(outcomes) == 1
    return outcomes[0][0], _step(image, recs)


def _isr_grows(
    control: ClusterControl, image: MetadataImage, isr: list[int], name: str = "t"
) -> MetadataImage:
    part = _part(image, name)
    tid = str(image.topics_by_name[name].topic_id)
    answer, recs = control.alter_partition(
        image, part.leader, tid, 0, part.leader_epoch, part.partition_epoch, isr
    )
    assert answer.error_code == 0, answer
    after = _step(image, recs)
    now = _part(after, name)
    assert (answer.leader_id, answer.leader_epoch, answer.isr, answer.partition_epoch) == (
        now.leader,
        now.leader_epoch,
        now.isr,
        now.partition_epoch,
    )
    return after


def test_a_move_adds_the_target_keeps_the_old_replica_and_leader_until_the_isr_has_the_target() -> (
    None
):
    control = _control()
    image = _placed(_cluster(control), "t", [1])
    code, image = _reassign(image, [2, 3])
    assert code == 0
    part = _part(image, "t")
    assert part.replicas == (2, 3, 1)
    assert (part.adding_replicas, part.removing_replicas) == ((2, 3), (1,))
    assert (part.isr, part.leader, part.leader_epoch) == ((1,), 1, 0)
    assert reassignment.ongoing(image, None) == [
        ("t", [reassignment.Ongoing(0, (2, 3, 1), (2, 3), (1,))])
    ]

    image = _isr_grows(control, image, [1, 2])
    assert _part(image, "t").reassigning and _part(image, "t").isr == (2, 1)

    image = _isr_grows(control, image, [1, 2, 3])
    part = _part(image, "t")
    assert not part.reassigning
    assert part.replicas == (2, 3) and part.isr == (2, 3)
    # the leader was being removed: the first target replica in the ISR leads
    assert (part.leader, part.leader_epoch) == (2, 1)
    assert reassignment.ongoing(image, None) == []


def test_a_reorder_within_the_isr_completes_at_once_without_a_new_leader_epoch() -> None:
    control = _control()
    image = _placed(_cluster(control), "t", [1, 2, 3])
    code, image = _reassign(image, [3, 2, 1])
    part = _part(image, "t")
    assert code == 0 and not part.reassigning
    assert part.replicas == (3, 2, 1)
    assert (part.leader, part.leader_epoch) == (1, 0)


def test_dropping_the_leader_from_an_in_sync_partition_moves_leadership_and_bumps_the_epoch() -> (
    None
):
    control = _control()
    image = _placed(_cluster(control), "t", [1, 2, 3])
    code, image = _reassign(image, [3, 2])
    part = _part(image, "t")
    assert code == 0 and not part.reassigning
    assert (part.replicas, part.isr) == ((3, 2), (2, 3))
    assert (part.leader, part.leader_epoch) == (3, 1)


def test_dropping_a_follower_keeps_the_leader_but_still_bumps_the_leader_epoch() -> None:
    control = _control()
    image = _placed(_cluster(control), "t", [1, 2, 3])
    _, image = _reassign(image, [1, 2])
    part = _part(image, "t")
    assert (part.replicas, part.leader, part.leader_epoch) == ((1, 2), 1, 1)


def test_cancel_reverts_to_the_original_replicas_and_drops_added_ones_from_the_isr() -> None:
    control = _control()
    image = _placed(_cluster(control), "t", [1])
    _, image = _reassign(image, [2, 3])
    image = _isr_grows(control, image, [1, 2])
    code, image = _reassign(image, None)
    part = _part(image, "t")
    assert code == 0 and not part.reassigning
    assert (part.replicas, part.isr, part.leader) == ((1,), (1,), 1)
    assert part.leader_epoch == 1  # replicas 2 and 3 left: their fetches are fenced


def test_cancel_without_a_reassignment_is_no_reassignment_in_progress() -> None:
    image = _placed(_cluster(_control()), "t", [1])
    code, after = _reassign(image, None)
    assert code == reassignment.NO_REASSIGNMENT_IN_PROGRESS and after.topics_by_name == (
        image.topics_by_name
    )


def test_cancel_that_would_need_an_unclean_election_is_refused_unless_the_topic_allows_it() -> None:
    image = _placed(_cluster(_control()), "t", [1])
    _, image = _reassign(image, [2])
    tid = str(image.topics_by_name["t"].topic_id)
    # only the adding replica is in sync (and leads)
    image = _step(image, [R.partition_change_record(tid, 0, leader=2, isr=[2], leader_epoch=1)])
    code, _ = _reassign(image, None)
    assert code == reassignment.INVALID_REPLICA_ASSIGNMENT
    outcomes, recs = reassignment.alter(image, [("t", 0, None)], lambda i, t: True)
    assert outcomes == [(0, None)]
    part = _part(_step(image, recs), "t")
    assert (part.replicas, part.isr, part.leader, part.leader_epoch) == ((1,), (1,), 1, 2)


def test_a_new_target_during_a_reassignment_starts_from_the_merged_replicas() -> None:
    image = _placed(_cluster(_control()), "t", [1])
    _, image = _reassign(image, [2])
    _, image = _reassign(image, [3])
    part = _part(image, "t")
    assert part.replicas == (3, 1, 2)
    assert (part.adding_replicas, part.removing_replicas) == ((3,), (1, 2))


def test_bad_targets_get_kafkas_error_codes() -> None:
    image = _placed(_cluster(_control()), "t", [1, 2])
    bad = [
        ("nope", 0, [1]),  # unknown topic
        ("t", 7, [1]),  # unknown partition
        ("t", 0, []),  # empty
        ("t", 0, [2, 2]),  # duplicate
        ("t", 0, [1, 9]),  # never registered
    ]
    outcomes, recs = reassignment.alter(image, bad, _never_unclean)
    assert [code for code, _ in outcomes] == [
        reassignment.UNKNOWN_TOPIC_OR_PARTITION,
        reassignment.UNKNOWN_TOPIC_OR_PARTITION,
        reassignment.INVALID_REPLICA_ASSIGNMENT,
        reassignment.INVALID_REPLICA_ASSIGNMENT,
        reassignment.INVALID_REPLICA_ASSIGNMENT,
    ]
    assert recs == []
    code, _ = _reassign(image, [3], allow_replication_factor_change=False)
    assert code == reassignment.INVALID_REPLICATION_FACTOR
    code, _ = _reassign(image, [3, 1], allow_replication_factor_change=False)
    assert code == 0


def test_a_fenced_but_registered_target_is_accepted_and_waits_for_the_broker() -> None:
    control = _control()
    image = _placed(_cluster(control), "t", [1])
    image = _step(image, [R.broker_registration_change_record(3, fenced=True)])
    code, image = _reassign(image, [3])
    assert code == 0 and _part(image, "t").adding_replicas == (3,)


def test_completion_needs_a_target_replica_in_the_isr_that_may_lead() -> None:
    part = PartitionImage(0, (2, 1), (1,), 1, 0, 0, (2,), (1,))
    sets = reassignment.ReplicaSets(part.replicas, (1, 2), (2,), (1,))
    done = reassignment.maybe_complete(sets)
    assert (done.replicas, done.isr, done.adding, done.removing) == ((2,), (2,), (), ())
    waiting = reassignment.ReplicaSets(part.replicas, (1,), (2,), (1,))
    assert reassignment.maybe_complete(waiting) is waiting
