"""Eligible leader replicas (KIP-966): who may lead once the ISR is lost.

With the `eligible.leader.replicas.version` feature at 1, the high watermark
of a partition advances only while its ISR holds at least
`min.insync.replicas` members (replication/leader_replication.py). So a
replica that leaves an ISR already below that size still holds every record
under the high watermark: it is an *eligible leader replica* (ELR). The
controller keeps them in the partition state (PartitionRecord /
PartitionChangeRecord `eligible_leader_replicas`), and elects from them,
cleanly, when the ISR has emptied.

Rules, as Kafka's controller (`PartitionChangeBuilder`), applied to every
partition change the controller writes (`complete`):

* An ISR of at least `min.insync.replicas` members (the topic's value, else
  the cluster's dynamic default, else the controller's own) clears the ELR
  and the last known ELR: nothing is needed beyond the ISR.
* Below that, the ELR becomes (old ISR ∪ old ELR) − new ISR − replicas that
  came back from an unclean shutdown. With the feature on, the ISR may
  become empty: its last member leaves it like any other.
* Election order (`cluster_control.py`): a live ISR member; with an empty
  ISR, a live ELR member, which leads with the ISR just itself (the other
  ELR members stay eligible); with ISR and ELR both empty, the *last known
  leader* when it is back (Kafka 4's unclean recovery: what Kafka did before
  4.0, when the last ISR member stayed in the ISR), as an unclean election
  would be (ISR just it); last, with `unclean.leader.election.enable`, any
  live replica.
* `last_known_elr` holds the last leader of a partition whose ISR emptied,
  from that change until the partition has a leader again.
* An unclean election (the new leader was in neither ISR nor ELR) clears the
  ELR: the other replicas may now hold records the new leader lacks.
* A broker registering after an unclean shutdown (its registration's
  previous broker epoch is not its epoch in the image: no clean-shutdown
  marker told it) leaves every ELR: its log may have lost the tail that made
  it eligible.
* With the feature at 0 the fields are cleared on the next change and never
  set.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from . import features as F
from . import records as R
from .image import MetadataImage, PartitionImage

NO_LEADER = -1
MIN_ISR = "min.insync.replicas"

MinIsrPolicy = Callable[[MetadataImage, str], int]


def enabled(image: MetadataImage) -> bool:
    return image.feature_level(F.ELIGIBLE_LEADER_REPLICAS_VERSION) >= F.ELR_V1


def min_insync_replicas(image: MetadataImage, topic: str, static_default: int) -> int:
    """The topic's `min.insync.replicas`, else the cluster-wide dynamic one,
    else the node's own (server.properties)."""
    for value in (image.topic_configs(topic).get(MIN_ISR),
                  image.configs.get((R.RESOURCE_BROKER, ""), {}).get(MIN_ISR)):
        if value is not None:
            try:
                return int(value)
            except ValueError:
                pass
    return static_default


@dataclass(frozen=True, slots=True)
class _State:
    leader: int
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    replicas: tuple[int, ...]


def complete(image: MetadataImage, records: Iterable[R.MetadataRecord],
             min_isr: MinIsrPolicy, unclean_shutdown: Iterable[int] = ()
             ) -> list[R.MetadataRecord]:
    """`records` with each PartitionChangeRecord given the ELR fields the
    change implies (records of one partition chain: each starts from the one
    before). `unclean_shutdown`: brokers to drop from every ELR touched."""
    on = enabled(image)
    dropped = frozenset(unclean_shutdown)
    states: dict[tuple[str, int], _State] = {}
    out = []
    for rec in records:
        if rec["type"] != R.PARTITION_CHANGE:
            out.append(rec)
            continue
        key = (rec["topic_id"], rec["partition"])
        topic = image.topics_by_id.get(uuid.UUID(rec["topic_id"]))
        part = topic.partitions.get(rec["partition"]) if topic is not None else None
        if topic is None or part is None:
            out.append(rec)
            continue
        state = states.get(key) or _state(part)
        rec = dict(rec)
        elr, lke = _targets(state, rec, min_isr(image, topic.name) if on else 0, on, dropped)
        if elr != state.elr:
            rec["eligible_leader_replicas"] = list(elr)
        if lke != state.last_known_elr:
            rec["last_known_elr"] = list(lke)
        states[key] = _State(rec.get("leader", state.leader), tuple(rec.get("isr", state.isr)),
                             elr, lke, tuple(rec.get("replicas", state.replicas)))
        out.append(rec)
    return out


def _state(part: PartitionImage) -> _State:
    return _State(part.leader, part.isr, part.elr, part.last_known_elr, part.replicas)


def _targets(old: _State, rec: R.MetadataRecord, min_isr: int, on: bool,
             dropped: frozenset[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if not on:
        return (), ()
    isr = tuple(rec.get("isr", old.isr))
    leader = rec.get("leader", old.leader)
    unclean = ("leader" in rec and leader != NO_LEADER and leader != old.leader
               and leader not in old.isr and leader not in old.elr)
    if unclean or len(isr) >= min_isr:
        return (), ()
    replicas = rec.get("replicas", old.replicas)  # a reassignment drops some
    kept = [r for r in dict.fromkeys(old.isr + old.elr)
            if r not in isr and r not in dropped and r in replicas]
    elr = tuple(sorted(kept))
    # the last known leader: set when the ISR empties, kept while there is no
    # leader, cleared once there is one
    lke = old.last_known_elr
    if not isr and leader == NO_LEADER:
        if old.leader != NO_LEADER:
            lke = (old.leader,)
    elif leader != NO_LEADER:
        lke = ()
    return elr, lke


def elect(image: MetadataImage, part: PartitionImage, alive: Callable[[int], bool],
          isr_after: tuple[int, ...]) -> tuple[int, bool]:
    """With the ISR gone (`isr_after` empty): the ELR member, else the last
    known leader, that may lead, and whether it is the unclean recovery path
    (the last known leader: ISR just it, ELR cleared). (NO_LEADER, False) when
    none may, or when the feature is off or the ISR is not empty."""
    if not enabled(image) or isr_after:
        return NO_LEADER, False
    for r in part.replicas:
        if r in part.elr and alive(r):
            return r, False
    if not part.elr and len(part.last_known_elr) == 1 and alive(part.last_known_elr[0]):
        return part.last_known_elr[0], True
    return NO_LEADER, False


# -- min.insync.replicas while the ELR is kept ---------------------------------------------


def config_refusal(image: MetadataImage, resource_type: int, resource_name: str,
                   current: Mapping[str, str | None], new: Mapping[str, str | None]
                   ) -> str | None:
    """Kafka's rules with the feature on: `min.insync.replicas` is one
    cluster-wide value, never a single broker's, and it cannot be removed."""
    if not enabled(image) or resource_type != R.RESOURCE_BROKER:
        return None
    if resource_name and new.get(MIN_ISR) is not None and new.get(MIN_ISR) != current.get(MIN_ISR):
        return (f"Broker-level {MIN_ISR} cannot be altered while eligible leader "
                "replicas are enabled: set it for the cluster (the default broker resource)")
    if not resource_name and current.get(MIN_ISR) is not None and new.get(MIN_ISR) is None:
        return (f"Cluster-level {MIN_ISR} cannot be removed while eligible leader "
                "replicas are enabled")
    return None


def cleared_by_config(image: MetadataImage, config_records: Iterable[R.MetadataRecord]
                      ) -> list[R.MetadataRecord]:
    """A change of `min.insync.replicas` (a topic's, or the cluster's) makes the
    kept ELRs meaningless: the partitions it reaches lose theirs (Kafka's
    ClearElrRecord), here as PartitionChangeRecords."""
    topics: set[str] = set()
    every = False
    for rec in config_records:
        if rec["type"] != R.CONFIG or rec["name"] != MIN_ISR:
            continue
        if rec["resource_type"] == R.RESOURCE_TOPIC:
            topics.add(rec["resource_name"])
        elif rec["resource_type"] == R.RESOURCE_BROKER and rec["resource_name"] == "":
            every = True
    out = []
    for topic in image.topics_by_name.values():
        if not every and topic.name not in topics:
            continue
        for part in topic.partitions.values():
            if part.elr or part.last_known_elr:
                out.append(R.partition_change_record(
                    str(topic.topic_id), part.partition, eligible_leader_replicas=[],
                    last_known_elr=[]))
    return out
