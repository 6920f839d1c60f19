"""Eligible leader replicas (KIP-966) in the controller: metadata/elr.py and the
elections of metadata/cluster_control.py, as pure functions over images."""

from __future__ import annotations

import random

from odradek.metadata import elr as ELR
from odradek.metadata import features as F
from odradek.metadata import records as R
from odradek.metadata.cluster_control import NO_LEADER, ClusterControl
from odradek.metadata.controller import Controller, NewTopic
from odradek.metadata.image import MetadataImage, apply, records_of

SESSION_MS = 1000


def _control(unclean: bool = False) -> ClusterControl:
    return ClusterControl(SESSION_MS, lambda image, topic: unclean,
                          min_insync_replicas=lambda image, topic: ELR.min_insync_replicas(
                              image, topic, 1))


def _step(image: MetadataImage, records: list[R.MetadataRecord]) -> MetadataImage:
    return apply(image, records, image.offset + max(len(records), 1))


def _endpoint(port: int) -> list[dict[str, object]]:
    return [{"listener": "PLAINTEXT", "host": "127.0.0.1", "port": port,
             "security_protocol": "PLAINTEXT"}]


def _cluster(control: ClusterControl, elr: bool = True, min_isr: int = 2) -> MetadataImage:
    """Brokers 1-3 unfenced, topic t (one partition, replicas [1, 2, 3], leader 1),
    min.insync.replicas=2, the feature at 1 when `elr`."""
    image = MetadataImage()
    if elr:
        _, recs = F.update(image.features, [F.Update(F.ELIGIBLE_LEADER_REPLICAS_VERSION, 1)],
                           lambda: F.elr_safety_records(image.configs, 1))
        image = _step(image, recs)
    for b in (1, 2, 3):
        image = _register(control, image, b, f"inc-{b}")
    controller = Controller(1, 1, lambda configs: None, rng=random.Random(1))
    results, recs = controller.create_topics(
        image, [NewTopic("t", -1, -1, {0: [1, 2, 3]}, {"min.insync.replicas": str(min_isr)})],
        False)
    assert results["t"].error_code == 0, results["t"]
    return _step(image, recs)


def _register(control: ClusterControl, image: MetadataImage, b: int, incarnation: str,
              previous_epoch: int | None = None) -> MetadataImage:
    _, recs = control.register(image, b, incarnation, _endpoint(9000 + b), None, 0,
                               previous_broker_epoch=previous_epoch)
    image = _step(image, recs)
    _, recs = control.heartbeat(image, b, image.brokers[b].epoch, image.offset,
                                     False, False, 0)
    image = _step(image, recs)
    assert not image.brokers[b].fenced
    return image


def _fence(control: ClusterControl, image: MetadataImage, b: int) -> MetadataImage:
    _, recs = control.heartbeat(image, b, image.brokers[b].epoch, image.offset,
                                     True, False, 0)
    return _step(image, recs)


def _part(image: MetadataImage):  # type: ignore[no-untyped-def]
    return image.topics_by_name["t"].partitions[0]


def _shrink(control: ClusterControl, image: MetadataImage, isr: list[int]) -> MetadataImage:
    part = _part(image)
    answer, recs = control.alter_partition(
        image, part.leader, str(image.topics_by_name["t"].topic_id), 0, part.leader_epoch,
        part.partition_epoch, isr)
    assert answer.error_code == 0, answer
    return _step(image, recs)


def test_replicas_leaving_an_isr_below_min_insync_replicas_become_eligible_leaders() -> None:
    control = _control()
    image = _cluster(control)
    image = _shrink(control, image, [1, 2])  # 2 >= min ISR: no ELR
    assert _part(image).isr == (1, 2) and _part(image).elr == ()
    image = _shrink(control, image, [1])
    assert _part(image).isr == (1,) and _part(image).elr == (2,)
    # 3 left while the ISR was still at min ISR: not eligible
    assert 3 not in _part(image).elr


def test_an_isr_back_at_min_insync_replicas_clears_the_elr() -> None:
    control = _control()
    image = _shrink(control, _shrink(control, _cluster(control), [1, 2]), [1])
    assert _part(image).elr == (2,)
    image = _shrink(control, image, [1, 3])
    assert _part(image).isr == (1, 3)
    assert _part(image).elr == () and _part(image).last_known_elr == ()


def test_the_last_isr_member_fenced_empties_the_isr_and_joins_the_elr() -> None:
    control = _control()
    image = _shrink(control, _shrink(control, _cluster(control), [1, 2]), [1])
    image = _fence(control, image, 2)
    image = _fence(control, image, 1)
    part = _part(image)
    assert part.leader == NO_LEADER and part.isr == ()
    assert part.elr == (1, 2)
    assert part.last_known_elr == (1,)  # the last leader


def test_an_eligible_leader_replica_that_comes_back_leads_cleanly() -> None:
    control = _control()
    image = _shrink(control, _shrink(control, _cluster(control), [1, 2]), [1])
    image = _fence(control, image, 3)
    image = _fence(control, image, 2)
    image = _fence(control, image, 1)
    epoch = _part(image).leader_epoch
    # broker 2 comes back after a clean shutdown: it names its epoch
    image = _register(control, image, 2, "inc-2b", previous_epoch=image.brokers[2].epoch)
    part = _part(image)
    assert part.leader == 2 and part.isr == (2,) and part.leader_epoch == epoch + 1
    assert part.elr == (1,)  # still eligible, not yet back
    assert part.last_known_elr == ()


def test_a_broker_back_from_an_unclean_shutdown_leaves_every_elr() -> None:
    control = _control()
    image = _shrink(control, _shrink(control, _cluster(control), [1, 2]), [1])
    image = _fence(control, image, 2)
    image = _fence(control, image, 1)
    assert _part(image).elr == (1, 2)
    image = _register(control, image, 2, "inc-2b", previous_epoch=-1)
    part = _part(image)
    assert part.elr == (1,) and part.leader == NO_LEADER and part.isr == ()


def test_the_last_known_leader_leads_once_isr_and_elr_are_empty() -> None:
    """Kafka 4's unclean recovery: with no ELR member left, the last leader
    may lead again, as the ISR's last member did before KIP-966."""
    control = _control()
    image = _shrink(control, _shrink(control, _cluster(control), [1, 2]), [1])
    image = _fence(control, image, 2)
    image = _fence(control, image, 1)
    image = _register(control, image, 2, "inc-2b", previous_epoch=-1)  # unclean: out of ELR
    image = _fence(control, image, 2)
    image = _register(control, image, 1, "inc-1b", previous_epoch=-1)  # out of ELR too
    part = _part(image)
    assert part.leader == 1 and part.isr == (1,)
    assert part.elr == () and part.last_known_elr == ()


def test_without_the_feature_the_last_isr_member_stays_and_no_elr_is_kept() -> None:
    control = _control()
    image = _shrink(control, _shrink(control, _cluster(control, elr=False), [1, 2]), [1])
    assert _part(image).elr == ()
    image = _fence(control, image, 1)
    part = _part(image)
    assert part.leader == NO_LEADER and part.isr == (1,) and part.elr == ()


def test_unclean_election_clears_the_elr() -> None:
    control = _control(unclean=True)
    image = _shrink(control, _shrink(control, _cluster(control), [1, 2]), [1])
    image = _fence(control, image, 3)
    image = _fence(control, image, 2)
    image = _fence(control, image, 1)
    # broker 3 was never eligible: only an unclean election lets it lead
    image = _register(control, image, 3, "inc-3b", previous_epoch=image.brokers[3].epoch)
    part = _part(image)
    assert part.leader == 3 and part.isr == (3,)
    assert part.elr == () and part.last_known_elr == ()


def test_the_elr_survives_a_metadata_snapshot() -> None:
    control = _control()
    image = _shrink(control, _shrink(control, _cluster(control), [1, 2]), [1])
    image = _fence(control, image, 2)
    image = _fence(control, image, 1)
    again = apply(MetadataImage(), records_of(image), image.offset)
    assert _part(again) == _part(image)


def test_switching_elr_on_makes_min_insync_replicas_a_cluster_config() -> None:
    image = MetadataImage()
    image = _step(image, [R.config_record(R.RESOURCE_BROKER, "2", "min.insync.replicas", "3")])
    results, recs = F.update(image.features, [F.Update(F.ELIGIBLE_LEADER_REPLICAS_VERSION, 1)],
                             lambda: F.elr_safety_records(image.configs, 2))
    assert [r.error_code for r in results] == [0]
    image = _step(image, recs)
    assert image.configs[(R.RESOURCE_BROKER, "")]["min.insync.replicas"] == "2"
    assert (R.RESOURCE_BROKER, "2") not in image.configs
    assert ELR.enabled(image)
    assert ELR.min_insync_replicas(image, "any", 1) == 2


def test_with_elr_min_insync_replicas_is_refused_per_broker_and_cannot_be_removed() -> None:
    control = _control()
    image = _cluster(control)
    controller = Controller(1, 1, lambda configs: None,
                            validate_broker_configs=lambda configs: None)
    results, _ = controller.incremental_alter_configs(
        image, [(R.RESOURCE_BROKER, "1", [("min.insync.replicas", 0, "2")])], False)
    assert results[0].error_code != 0 and "Broker-level" in (results[0].error_message or "")
    results, _ = controller.incremental_alter_configs(
        image, [(R.RESOURCE_BROKER, "", [("min.insync.replicas", 1, None)])], False)
    assert results[0].error_code != 0 and "removed" in (results[0].error_message or "")


def test_changing_a_topics_min_insync_replicas_clears_its_elr() -> None:
    control = _control()
    image = _shrink(control, _shrink(control, _cluster(control), [1, 2]), [1])
    assert _part(image).elr == (2,)
    controller = Controller(1, 1, lambda configs: None)
    results, recs = controller.incremental_alter_configs(
        image, [(R.RESOURCE_TOPIC, "t", [("min.insync.replicas", 0, "1")])], False)
    assert results[0].error_code == 0
    image = _step(image, recs)
    assert _part(image).elr == () and _part(image).isr == (1,)


def test_a_live_eligible_replica_takes_over_when_the_last_isr_member_is_fenced() -> None:
    control = _control()
    image = _shrink(control, _shrink(control, _cluster(control), [1, 2]), [1])
    assert _part(image).elr == (2,) and not image.brokers[2].fenced
    image = _fence(control, image, 1)
    part = _part(image)
    assert part.leader == 2 and part.isr == (2,) and part.elr == (1,)


def test_a_topic_shows_the_cluster_min_insync_replicas_as_a_dynamic_default() -> None:
    from odradek.config import BrokerConfig
    from odradek.configdef import ConfigSource
    from odradek.topic_config import describe_topic_config, effective_log_config

    broker = BrokerConfig.from_properties({"min.insync.replicas": "1"})
    entry = next(e for e in describe_topic_config(broker, {}, {}, {"min.insync.replicas": "2"})
                 if e.name == "min.insync.replicas")
    assert entry.value == "2" and entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert [(s.value, s.source) for s in entry.synonyms] == [
        ("2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("1", ConfigSource.STATIC_BROKER_CONFIG), ("1", ConfigSource.DEFAULT_CONFIG)]
    assert effective_log_config(broker, {}, {}, {"min.insync.replicas": "2"}
                                ).min_insync_replicas == 2
    # a topic override still wins
    entry = next(e for e in describe_topic_config(broker, {"min.insync.replicas": "3"}, {},
                                                  {"min.insync.replicas": "2"})
                 if e.name == "min.insync.replicas")
    assert entry.value == "3" and entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG



def test_elect_leaders_unclean_with_no_eligible_replica_alive_clears_the_elr() -> None:
    """A live ELR member leads on its own (no ElectLeaders needed); with none
    alive, ElectLeaders UNCLEAN picks any live replica and the ELR goes."""
    from odradek.metadata.cluster_control import ELECTION_UNCLEAN

    control = _control()
    image = _shrink(control, _shrink(control, _cluster(control), [1, 2]), [1])
    image = _fence(control, image, 3)
    image = _fence(control, image, 2)
    image = _fence(control, image, 1)
    image = _register(control, image, 3, "inc-3b", previous_epoch=image.brokers[3].epoch)
    assert _part(image).leader == NO_LEADER and _part(image).elr == (1, 2)
    results, recs = control.elect_leaders(image, ELECTION_UNCLEAN, [("t", 0)])
    image = _step(image, recs)
    assert results[("t", 0)][0] == 0
    part = _part(image)
    assert part.leader == 3 and part.isr == (3,)
    assert part.elr == () and part.last_known_elr == ()


def test_a_replica_reassigned_away_leaves_the_elr() -> None:
    from odradek.metadata import reassignment

    control = _control()
    image = _shrink(control, _cluster(control, min_isr=3), [1])
    assert _part(image).elr == (2, 3)
    outcomes, recs = reassignment.alter(image, [("t", 0, [1, 3])], lambda image, topic: False)
    assert outcomes == [(0, None)]
    image = _step(image, control.with_elr(image, recs))
    image = _shrink(control, image, [1, 3])  # the target in sync: the reassignment completes
    part = _part(image)
    assert part.replicas == (1, 3) and part.isr == (1, 3)
    assert part.elr == ()  # 2 is no longer a replica; 3 is back in the ISR
