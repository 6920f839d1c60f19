"""The metadata image: an immutable view of the cluster's metadata.

Whoever needs metadata holds an image, never a lock. `apply(image, records,
offset)` replays records and returns the next image, sharing every part the
records did not touch. Nothing here reads a clock or a file.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from ..security import acl as A
from ..security.resources import AclOperation, ResourceType
from . import client_quotas as Q
from . import records as R
from .directory_id import realigned

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PartitionImage:
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # A reassignment in progress (KIP-455): `replicas` is the target followed by
    # the removing replicas; both empty when none is.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    # KIP-858: the log dir id of each replica, in `replicas` order; () when the
    # partition was recorded without them (metadata/directories.py).
    directories: tuple[str, ...] = ()
    # KIP-966 (metadata/elr.py): replicas out of the ISR that still hold every
    # record below the high watermark, and the last leader of a partition
    # whose ISR and ELR emptied (the unclean recovery path)
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionImage]


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class BrokerImage:
    node_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool = False
    in_controlled_shutdown: bool = False
    # the metadata offset of the registration: Kafka's broker epoch
    epoch: int = -1
    incarnation_id: str | None = None
    # the directory ids it registered online (KIP-858); () when not told
    log_dirs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScramCredentialImage:
    """A user's SCRAM credential for one mechanism (UserScramCredentialRecord)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keys are secrets
        return f"ScramCredentialImage(iterations={self.iterations})"


@dataclass(frozen=True, slots=True)
class MetadataImage:
    offset: int = -1
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY)
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=lambda: _EMPTY)
    # (resource_type, resource_name) -> {config name: value}
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    brokers: Mapping[int, BrokerImage] = field(default_factory=lambda: _EMPTY)
    next_producer_id: int = 0
    # client quota entity -> {quota key: value} (metadata/client_quotas.py)
    client_quotas: Mapping[Q.Entity, Mapping[str, float]] = field(
        default_factory=lambda: _EMPTY)
    # ACLs by their id (AccessControlEntryRecord); security/acl.py decides with them
    acls: Mapping[str, A.AclBinding] = field(default_factory=lambda: _EMPTY)
    # (user name, mechanism id: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512) -> credential
    scram_credentials: Mapping[tuple[str, int], ScramCredentialImage] = field(
        default_factory=lambda: _EMPTY)
    # finalized feature levels (FeatureLevelRecord): name -> level >= 1
    features: Mapping[str, int] = field(default_factory=lambda: _EMPTY)

    def feature_level(self, name: str) -> int:
        return self.features.get(name, 0)

    def topic_configs(self, topic: str) -> Mapping[str, str]:
        return self.configs.get((R.RESOURCE_TOPIC, topic), _EMPTY)

    def broker_configs(self, node_id: int) -> Mapping[str, str]:
        return self.configs.get((R.RESOURCE_BROKER, str(node_id)), _EMPTY)


def apply(image: MetadataImage, records: Iterable[R.MetadataRecord], offset: int) -> MetadataImage:
    """Replay `records` (all at or below `offset`) onto `image`."""
    by_name: dict[str, TopicImage] | None = None
    by_id: dict[uuid.UUID, TopicImage] | None = None
    configs: dict[tuple[int, str], Mapping[str, str]] | None = None
    brokers: dict[int, BrokerImage] | None = None
    scram: dict[tuple[str, int], ScramCredentialImage] | None = None
    next_pid = image.next_producer_id
    quotas: dict[Q.Entity, Mapping[str, float]] | None = None
    acls: dict[str, A.AclBinding] | None = None
    features: dict[str, int] | None = None
    touched: dict[uuid.UUID, dict[int, PartitionImage]] = {}

    for rec in records:
        kind = rec["type"]
        if kind in (R.ACCESS_CONTROL_ENTRY, R.REMOVE_ACCESS_CONTROL_ENTRY):
            if acls is None:
                acls = dict(image.acls)
            _apply_acl(acls, rec)
            continue
        if kind in (R.TOPIC, R.PARTITION, R.PARTITION_CHANGE, R.REMOVE_TOPIC):
            if by_name is None or by_id is None:
                by_name = dict(image.topics_by_name)
                by_id = dict(image.topics_by_id)
            if kind == R.TOPIC:
                tid = uuid.UUID(rec["topic_id"])
                topic = TopicImage(rec["name"], tid, _EMPTY)
                by_name[topic.name] = topic
                by_id[tid] = topic
                touched.pop(tid, None)
            elif kind in (R.PARTITION, R.PARTITION_CHANGE):
                tid = uuid.UUID(rec["topic_id"])
                topic = by_id[tid]
                # one copy of a topic's partitions per apply, not one per record
                # (4,000 new partitions were 8M entries copied)
                parts = touched.get(tid)
                if parts is None:
                    parts = touched[tid] = dict(topic.partitions)
                old = parts.get(rec["partition"])
                if kind == R.PARTITION or old is None:
                    part = PartitionImage(
                        rec["partition"],
                        tuple(rec["replicas"]),
                        tuple(rec["isr"]),
                        rec["leader"],
                        rec["leader_epoch"],
                        rec.get("partition_epoch", 0),
                        tuple(rec.get("adding_replicas", ())),
                        tuple(rec.get("removing_replicas", ())),
                        directories=tuple(rec.get("directories", ())),
                        elr=tuple(rec.get("eligible_leader_replicas", ())),
                        last_known_elr=tuple(rec.get("last_known_elr", ())),
                    )
                else:
                    part = replace(
                        old,
                        replicas=tuple(rec.get("replicas", old.replicas)),
                        isr=tuple(rec.get("isr", old.isr)),
                        leader=rec.get("leader", old.leader),
                        leader_epoch=rec.get("leader_epoch", old.leader_epoch),
                        partition_epoch=old.partition_epoch + 1,
                        adding_replicas=tuple(rec.get("adding_replicas", old.adding_replicas)),
                        removing_replicas=tuple(
                            rec.get("removing_replicas", old.removing_replicas)),
                        directories=_directories_after(old, rec),
                        elr=tuple(rec.get("eligible_leader_replicas", old.elr)),
                        last_known_elr=tuple(rec.get("last_known_elr", old.last_known_elr)),
                    )
                parts[part.partition] = part
            else:  # REMOVE_TOPIC
                tid = uuid.UUID(rec["topic_id"])
                touched.pop(tid, None)
                topic = by_id.pop(tid)
                by_name.pop(topic.name, None)
                if configs is None:
                    configs = dict(image.configs)
                configs.pop((R.RESOURCE_TOPIC, topic.name), None)
        elif kind == R.CONFIG:
            if configs is None:
                configs = dict(image.configs)
            key = (rec["resource_type"], rec["resource_name"])
            entries = dict(configs.get(key, _EMPTY))
            if rec["value"] is None:
                entries.pop(rec["name"], None)
            else:
                entries[rec["name"]] = rec["value"]
            if entries:
                configs[key] = MappingProxyType(entries)
            else:
                configs.pop(key, None)
        elif kind == R.REGISTER_BROKER:
            if brokers is None:
                brokers = dict(image.brokers)
            endpoints = tuple(Endpoint(**e) for e in rec["endpoints"])
            # A snapshot's RegisterBrokerRecord carries the broker epoch (the
            # offset of the registration it stands for) and the shutdown state.
            brokers[rec["broker_id"]] = BrokerImage(
                rec["broker_id"], endpoints, rec.get("rack"), bool(rec.get("fenced", False)),
                bool(rec.get("in_controlled_shutdown", False)), rec.get("broker_epoch", offset),
                rec.get("incarnation_id"), tuple(rec.get("log_dirs", ())),
            )
        elif kind == R.UNREGISTER_BROKER:
            if brokers is None:
                brokers = dict(image.brokers)
            current = brokers.get(rec["broker_id"])
            if current is not None and current.epoch == rec["broker_epoch"]:
                del brokers[rec["broker_id"]]
        elif kind == R.BROKER_REGISTRATION_CHANGE:
            if brokers is None:
                brokers = dict(image.brokers)
            current = brokers.get(rec["broker_id"])
            if current is not None:
                brokers[rec["broker_id"]] = replace(
                    current,
                    fenced=rec.get("fenced", current.fenced),
                    in_controlled_shutdown=rec.get(
                        "in_controlled_shutdown",
                        # unfencing ends a controlled shutdown, fencing finishes it
                        False if "fenced" in rec else current.in_controlled_shutdown,
                    ),
                    log_dirs=tuple(rec.get("log_dirs", current.log_dirs)),
                )
        elif kind == R.PRODUCER_IDS:
            next_pid = max(next_pid, rec["next_producer_id"])
        elif kind == R.CLIENT_QUOTA:
            if quotas is None:
                quotas = dict(image.client_quotas)
            Q.applied(quotas, rec)
        elif kind in (R.USER_SCRAM_CREDENTIAL, R.REMOVE_USER_SCRAM_CREDENTIAL):
            if scram is None:
                scram = dict(image.scram_credentials)
            _apply_scram(scram, rec)
        elif kind == R.FEATURE_LEVEL:
            if features is None:
                features = dict(image.features)
            if rec["feature_level"] > 0:
                features[rec["name"]] = rec["feature_level"]
            else:
                features.pop(rec["name"], None)

    if touched:
        assert by_name is not None and by_id is not None
        for tid, parts in touched.items():
            topic = replace(by_id[tid], partitions=MappingProxyType(parts))
            by_name[topic.name] = topic
            by_id[tid] = topic
    return MetadataImage(
        offset=offset,
        topics_by_name=image.topics_by_name if by_name is None else MappingProxyType(by_name),
        topics_by_id=image.topics_by_id if by_id is None else MappingProxyType(by_id),
        configs=image.configs if configs is None else MappingProxyType(configs),
        brokers=image.brokers if brokers is None else MappingProxyType(brokers),
        next_producer_id=next_pid,
        client_quotas=image.client_quotas if quotas is None else MappingProxyType(quotas),
        acls=image.acls if acls is None else MappingProxyType(acls),
        scram_credentials=(image.scram_credentials if scram is None
                           else MappingProxyType(scram)),
        features=image.features if features is None else MappingProxyType(features),
    )


def _apply_acl(acls: dict[str, A.AclBinding], rec: R.MetadataRecord) -> None:
    if rec["type"] == R.REMOVE_ACCESS_CONTROL_ENTRY:
        acls.pop(rec["id"], None)
        return
    acls[rec["id"]] = A.AclBinding(
        ResourceType(rec["resource_type"]), rec["resource_name"],
        A.PatternType(rec["pattern_type"]), rec["principal"], rec["host"],
        AclOperation(rec["operation"]), A.Permission(rec["permission_type"]))


def acl_record(acl_id: str, acl: A.AclBinding) -> R.MetadataRecord:
    return R.access_control_entry_record(
        acl_id, int(acl.resource_type), acl.resource_name, int(acl.pattern_type),
        acl.principal, acl.host, int(acl.operation), int(acl.permission))


def _apply_scram(scram: dict[tuple[str, int], ScramCredentialImage],
                 rec: R.MetadataRecord) -> None:
    key = (rec["name"], rec["mechanism"])
    if rec["type"] == R.REMOVE_USER_SCRAM_CREDENTIAL:
        scram.pop(key, None)
        return
    scram[key] = ScramCredentialImage(
        base64.b64decode(rec["salt"]), base64.b64decode(rec["stored_key"]),
        base64.b64decode(rec["server_key"]), rec["iterations"])


def _directories_after(old: PartitionImage, rec: R.MetadataRecord) -> tuple[str, ...]:
    """A change names the directories, or moves replicas (a kept replica keeps
    its dir, a new one is unassigned), or leaves them as they were."""
    if "directories" in rec:
        return tuple(rec["directories"])
    if "replicas" in rec:
        return realigned(old.replicas, old.directories, tuple(rec["replicas"]))
    return old.directories


def records_of(image: MetadataImage) -> list[R.MetadataRecord]:
    """Records whose replay onto an empty image gives `image` back (offset
    aside): what a metadata snapshot holds. `apply(MetadataImage(),
    records_of(image), image.offset) == image`."""
    out: list[R.MetadataRecord] = [
        R.feature_level_record(name, level) for name, level in sorted(image.features.items())]
    for broker in sorted(image.brokers.values(), key=lambda b: b.node_id):
        rec = R.register_broker_record(
            broker.node_id,
            [{"listener": e.listener, "host": e.host, "port": e.port,
              "security_protocol": e.security_protocol} for e in broker.endpoints],
            broker.rack, broker.fenced, broker.incarnation_id,
            list(broker.log_dirs) if broker.log_dirs else None,
        )
        rec["broker_epoch"] = broker.epoch
        if broker.in_controlled_shutdown:
            rec["in_controlled_shutdown"] = True
        out.append(rec)
    for topic in sorted(image.topics_by_name.values(), key=lambda t: t.name):
        out.append(R.topic_record(topic.name, str(topic.topic_id)))
        for part in sorted(topic.partitions.values(), key=lambda p: p.partition):
            out.append({
                "type": R.PARTITION, "topic_id": str(topic.topic_id),
                "partition": part.partition, "replicas": list(part.replicas),
                "isr": list(part.isr), "leader": part.leader, "leader_epoch": part.leader_epoch,
                "partition_epoch": part.partition_epoch,
                "adding_replicas": list(part.adding_replicas),
                "removing_replicas": list(part.removing_replicas),
                "directories": list(part.directories),
                **({"eligible_leader_replicas": list(part.elr)} if part.elr else {}),
                **({"last_known_elr": list(part.last_known_elr)}
                   if part.last_known_elr else {}),
            })
    for (resource_type, resource_name), entries in sorted(image.configs.items()):
        for name, value in sorted(entries.items()):
            out.append(R.config_record(resource_type, resource_name, name, value))
    if image.next_producer_id:
        out.append(R.producer_ids_record(-1, image.next_producer_id))
    out.extend(Q.records_of(image.client_quotas))
    out.extend(acl_record(i, acl) for i, acl in sorted(image.acls.items()))
    for (name, mechanism), c in sorted(image.scram_credentials.items()):
        out.append(R.user_scram_credential_record(name, mechanism, c.salt, c.stored_key,
                                                  c.server_key, c.iterations))
    return out
