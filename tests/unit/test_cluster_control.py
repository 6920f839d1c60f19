"""The controller's cluster control as pure functions: registration, fencing,
elections from the ISR, AlterPartition, controlled shutdown, placement."""

from __future__ import annotations

import random
import uuid

from odradek.metadata import records as R
from odradek.metadata.cluster_control import (
    BROKER_ID_NOT_REGISTERED,
    FENCED_LEADER_EPOCH,
    INELIGIBLE_REPLICA,
    INVALID_UPDATE_VERSION,
    NO_LEADER,
    STALE_BROKER_EPOCH,
    ClusterControl,
)
from odradek.metadata.controller import Controller, NewTopic
from odradek.metadata.image import MetadataImage, apply

SESSION_MS = 1000


def _control(unclean: bool = False) -> ClusterControl:
    return ClusterControl(SESSION_MS, lambda image, topic: unclean)


def _endpoint(port: int) -> list[dict[str, object]]:
    return [{"listener": "PLAINTEXT", "host": "127.0.0.1", "port": port,
             "security_protocol": "PLAINTEXT"}]


def _step(image: MetadataImage, records: list[R.MetadataRecord]) -> MetadataImage:
    return apply(image, records, image.offset + max(len(records), 1))


def _cluster(control: ClusterControl, n: int = 3, racks: dict[int, str] | None = None,
             now: int = 0) -> MetadataImage:
    image = MetadataImage()
    for b in range(1, n + 1):
        _, recs = control.register(image, b, f"inc-{b}", _endpoint(9000 + b),
                                   (racks or {}).get(b), now)
        image = _step(image, recs)
        assert image.brokers[b].fenced
        answer, recs = control.heartbeat(image, b, image.brokers[b].epoch, image.offset,
                                         False, False, now)
        image = _step(image, recs)
        assert not answer.is_fenced and not image.brokers[b].fenced
    return image


def _topic(image: MetadataImage, name: str, partitions: int, rf: int,
           seed: int = 1) -> MetadataImage:
    controller = Controller(1, 1, lambda configs: None, rng=random.Random(seed))
    results, recs = controller.create_topics(
        image, [NewTopic(name, partitions, rf, {}, {})], False)
    assert results[name].error_code == 0, results[name]
    return _step(image, recs)


def _part(image: MetadataImage, name: str, p: int = 0):  # type: ignore[no-untyped-def]
    return image.topics_by_name[name].partitions[p]


def test_a_broker_is_unfenced_only_once_it_has_caught_up_to_its_registration() -> None:
    control = _control()
    image = MetadataImage()
    _, recs = control.register(image, 1, "a", _endpoint(1), None, 0)
    image = _step(image, recs)
    epoch = image.brokers[1].epoch
    answer, recs = control.heartbeat(image, 1, epoch, epoch - 1, False, False, 0)
    assert answer.is_fenced and not answer.is_caught_up and recs == []
    answer, recs = control.heartbeat(image, 1, epoch + 5, epoch, False, False, 0)
    assert answer.error_code == STALE_BROKER_EPOCH


def test_a_silent_broker_is_fenced_and_its_leadership_moves_to_an_isr_member() -> None:
    control = _control()
    image = _topic(_cluster(control), "t", 3, 3)
    led_by_1 = [p for p, part in image.topics_by_name["t"].partitions.items() if part.leader == 1]
    assert led_by_1
    for b in (2, 3):
        control.heartbeat(image, b, image.brokers[b].epoch, image.offset, False, False, 1500)
    image = _step(image, control.check_sessions(image, 1500))
    assert image.brokers[1].fenced and not image.brokers[2].fenced
    for p, part in image.topics_by_name["t"].partitions.items():
        assert part.leader in (2, 3)
        assert 1 not in part.isr
        if p in led_by_1:
            assert part.leader_epoch == 1


def test_the_next_session_expiry_is_the_first_unfenced_broker_s_last_contact_plus_the_timeout(
) -> None:
    control = _control()
    image = _cluster(control)
    assert control.next_session_expiry_ms(image) == SESSION_MS + 1  # all heard from at 0
    for b in (2, 3):
        control.heartbeat(image, b, image.brokers[b].epoch, image.offset, False, False, 700)
    assert control.next_session_expiry_ms(image) == SESSION_MS + 1  # broker 1's, at 0
    # one ms earlier nothing is fenced; at the expiry broker 1 is
    assert control.check_sessions(image, SESSION_MS) == []
    image = _step(image, control.check_sessions(image, SESSION_MS + 1))
    assert image.brokers[1].fenced
    assert control.next_session_expiry_ms(image) == 700 + SESSION_MS + 1
    assert control.next_session_expiry_ms(MetadataImage()) is None


def test_the_last_isr_member_fenced_leaves_the_partition_leaderless_until_it_returns() -> None:
    control = _control()
    image = _topic(_cluster(control), "t", 1, 3)
    leader = _part(image, "t").leader
    for dead in [b for b in (1, 2, 3) if b != leader] + [leader]:
        image = _step(image, control._leave(image, dead)
                      + [R.broker_registration_change_record(dead, fenced=True)])
    part = _part(image, "t")
    assert part.leader == NO_LEADER and part.isr == (leader,)
    # an out-of-sync replica coming back may not lead (unclean election is off)
    other = next(b for b in (1, 2, 3) if b != leader)
    _, recs = control.heartbeat(image, other, image.brokers[other].epoch, image.offset,
                                False, False, 0)
    image = _step(image, recs)
    assert _part(image, "t").leader == NO_LEADER
    # the last ISR member coming back leads again
    _, recs = control.heartbeat(image, leader, image.brokers[leader].epoch, image.offset,
                                False, False, 0)
    image = _step(image, recs)
    assert _part(image, "t").leader == leader


def test_unclean_leader_election_lets_an_out_of_sync_replica_lead() -> None:
    control = _control(unclean=True)
    image = _topic(_cluster(control), "t", 1, 3)
    part = _part(image, "t")
    image = _step(image, [R.partition_change_record(
        str(image.topics_by_name["t"].topic_id), 0, isr=[part.leader])])
    image = _step(image, control._leave(image, part.leader)
                  + [R.broker_registration_change_record(part.leader, fenced=True)])
    after = _part(image, "t")
    assert after.leader not in (NO_LEADER, part.leader)
    assert after.isr == (after.leader,)


def test_alter_partition_checks_leader_epochs_and_eligibility() -> None:
    control = _control()
    image = _topic(_cluster(control), "t", 1, 3)
    part = _part(image, "t")
    tid = str(image.topics_by_name["t"].topic_id)
    follower = next(r for r in part.replicas if r != part.leader)
    shrunk = [r for r in part.isr if r != follower]
    answer, recs = control.alter_partition(image, part.leader, tid, 0, part.leader_epoch,
                                           part.partition_epoch, shrunk)
    assert answer.error_code == 0 and list(answer.isr) == shrunk
    image = _step(image, recs)
    assert _part(image, "t").isr == tuple(shrunk)
    # a stale partition epoch or leader epoch is refused
    answer, _ = control.alter_partition(image, part.leader, tid, 0, part.leader_epoch,
                                        part.partition_epoch, list(part.isr))
    assert answer.error_code == INVALID_UPDATE_VERSION
    answer, _ = control.alter_partition(image, part.leader, tid, 0, part.leader_epoch - 1,
                                        _part(image, "t").partition_epoch, list(part.isr))
    assert answer.error_code == FENCED_LEADER_EPOCH
    # a fenced broker may not join the ISR
    image = _step(image, [R.broker_registration_change_record(follower, fenced=True)])
    answer, _ = control.alter_partition(image, part.leader, tid, 0, part.leader_epoch,
                                        _part(image, "t").partition_epoch, list(part.isr))
    assert answer.error_code == INELIGIBLE_REPLICA


def test_controlled_shutdown_moves_leadership_away_before_the_broker_may_stop() -> None:
    control = _control()
    image = _topic(_cluster(control), "t", 3, 3)
    answer, recs = control.heartbeat(image, 1, image.brokers[1].epoch, image.offset,
                                     False, True, 0)
    assert not answer.should_shut_down
    image = _step(image, recs)
    assert all(p.leader != 1 and 1 not in p.isr
               for p in image.topics_by_name["t"].partitions.values())
    answer, recs = control.heartbeat(image, 1, image.brokers[1].epoch, image.offset,
                                     False, True, 0)
    assert answer.should_shut_down
    image = _step(image, recs)
    assert image.brokers[1].fenced


def test_preferred_leaders_come_back_when_in_sync() -> None:
    control = _control()
    image = _topic(_cluster(control), "t", 3, 3)
    image = _step(image, control._leave(image, 1))
    assert all(p.leader != 1 for p in image.topics_by_name["t"].partitions.values())
    tid = str(image.topics_by_name["t"].topic_id)
    image = _step(image, [R.partition_change_record(tid, p, isr=[1, 2, 3]) for p in range(3)])
    image = _step(image, control.preferred_leader_elections(image))
    assert all(p.leader == p.replicas[0] for p in image.topics_by_name["t"].partitions.values())


def test_placement_alternates_racks_so_replicas_land_on_different_racks() -> None:
    control = _control()
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    image = _cluster(control, 6, racks)
    for seed in range(5):
        image2 = _topic(image, f"r{seed}", 12, 3, seed)
        for part in image2.topics_by_name[f"r{seed}"].partitions.values():
            assert len({racks[r] for r in part.replicas}) == 3, part.replicas
        leaders = [p.leader for p in image2.topics_by_name[f"r{seed}"].partitions.values()]
        assert sorted(leaders) == sorted([1, 2, 3, 4, 5, 6] * 2)


def test_placement_without_racks_round_robins_leaders_with_followers_on_the_next_brokers() -> None:
    control = _control()
    image = _topic(_cluster(control, 4), "t", 8, 2, seed=3)
    parts = image.topics_by_name["t"].partitions
    for p in range(8):
        first = parts[p].replicas[0]
        assert parts[p].replicas[1] == first % 4 + 1
        assert parts[(p + 1) % 8].replicas[0] == first % 4 + 1


def test_register_uuid_is_stable_for_one_incarnation() -> None:
    control = _control()
    image = _cluster(control, 1)
    inc = image.brokers[1].incarnation_id
    _, recs = control.register(image, 1, inc or "", _endpoint(1), None, 0)
    assert recs == []
    _, recs = control.register(image, 1, str(uuid.uuid4()), _endpoint(1), None, 0)
    assert recs and recs[-1]["fenced"] is True


def test_unregister_moves_leadership_away_and_removes_only_that_registration() -> None:
    control = _control()
    image = _topic(_cluster(control), "t", 3, 3)
    code, recs = control.unregister(image, 1)
    assert code == 0 and recs[-1]["type"] == R.UNREGISTER_BROKER
    stale = recs[-1]
    image = _step(image, recs)
    assert 1 not in image.brokers
    for part in image.topics_by_name["t"].partitions.values():
        assert part.leader in (2, 3) and 1 not in part.isr
    assert control.unregister(image, 1) == (BROKER_ID_NOT_REGISTERED, [])
    # the broker registers again; the old record, replayed, leaves the new one alone
    _, recs = control.register(image, 1, "inc-1b", _endpoint(9001), None, 0)
    image = _step(image, recs)
    assert 1 in image.brokers
    assert 1 in _step(image, [stale]).brokers
