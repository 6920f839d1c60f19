"""The controller: turns admin requests into metadata records.

Pure with respect to I/O: each method takes the current image and a request in
plain Python terms and returns per-item results plus the records to append.
The quorum appends the records atomically (one batch) and the image follows.
Placement spreads replicas over the live brokers as Kafka does (`_assign`);
registration, fencing, elections and ISR changes are in `cluster_control.py`.
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..topic_config import check_topic_config_change
from . import elr as ELR
from . import records as R
from .image import MetadataImage

# Kafka error codes used by the controller.
NONE = 0
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
INVALID_REQUEST = 42
UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_TOPIC_ID = 100
POLICY_VIOLATION = 44
THROTTLING_QUOTA_EXCEEDED = 89
THROTTLED = "The throttling quota has been exceeded."

MAX_TOPIC_NAME_LENGTH = 249
# Kafka's controller refuses to create more partitions than this in one request.
MAX_PARTITIONS_PER_REQUEST = 10_000
# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: one request's records are one
# batch of the metadata log (raft's max_records_per_append); more is refused.
MAX_RECORDS_PER_USER_OP = 10_000
TOO_LARGE_BATCH = "Unable to perform excessively large batch operation."
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
# KIP-599: may a request create or delete this many partitions now?
Admit = Callable[[int], bool]


@dataclass(slots=True)
class Result:
    error_code: int = NONE
    error_message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


def validate_topic_name(name: str) -> str | None:
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC.match(name):
        return (
            f"Topic name \"{name}\" is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


@dataclass(slots=True)
class NewTopic:
    name: str
    num_partitions: int
    replication_factor: int
    assignments: Mapping[int, Sequence[int]]  # partition -> replicas (manual assignment)
    configs: Mapping[str, str | None]


ConfigValidator = Callable[[Mapping[str, str | None]], None]  # raises InvalidConfig-like


class Controller:
    def __init__(
        self,
        default_num_partitions: int,
        default_replication_factor: int,
        validate_configs: Callable[[Mapping[str, str | None]], str | None],
        topic_config_default: Callable[[str], str | None] = lambda name: None,
        rng: random.Random | None = None,
        validate_broker_configs: Callable[[Mapping[str, str | None]], str | None] | None = None,
        validate_group_configs: Callable[[Mapping[str, str | None]], str | None] | None = None,
    ) -> None:
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        # returns an error message or None
        self.validate_configs = validate_configs
        # the value a topic config has when the topic does not override it
        self.topic_config_default = topic_config_default
        # dynamic broker configs (an error message or None); None: refused
        self.validate_broker_configs = validate_broker_configs
        # KIP-848 group configs (group_config.py); None: refused
        self.validate_group_configs = validate_group_configs
        self._rng = rng or random.Random()

    # -- placement -------------------------------------------------------------

    def _assign(
        self, image: MetadataImage, first_partition: int, count: int, rf: int
    ) -> list[list[int]]:
        """Kafka's placement: leaders round-robin over the live brokers from a
        random start, followers on the next brokers in order. With `broker.rack`
        set the broker list alternates racks (r1-b1, r2-b1, r1-b2, ...) and the
        followers skip racks the partition already uses until every rack has
        one replica, so a partition's replicas land on different racks."""
        live = sorted(
            b for b, info in image.brokers.items()
            if not info.fenced and not info.in_controlled_shutdown
        )
        racks = {b: image.brokers[b].rack for b in live}
        ordered = _rack_alternated(live, racks) if any(racks.values()) else live
        n = len(ordered)
        rack_count = len(set(racks.values()))
        start = self._rng.randrange(n) if n else 0
        out = []
        for p in range(first_partition, first_partition + count):
            first = (start + p) % n
            replicas = [ordered[first]]
            rest = [ordered[(first + j) % n] for j in range(1, n)]
            used = {racks[ordered[first]]}
            for b in rest:
                if len(replicas) == rf:
                    break
                if racks[b] not in used:
                    replicas.append(b)
                    used.add(racks[b])
                    if len(used) == rack_count:
                        used = set()
            for b in rest:
                if len(replicas) < rf and b not in replicas:
                    replicas.append(b)
            out.append(replicas)
        return out

    # -- topics ----------------------------------------------------------------

    def create_topics(
        self, image: MetadataImage, topics: Sequence[NewTopic], validate_only: bool,
        admit: Admit | None = None,
    ) -> tuple[dict[str, Result], list[R.MetadataRecord]]:
        """`admit(partitions)` (KIP-599's controller mutation quota, if one applies)
        is asked for each topic that would be created; False refuses it with
        THROTTLING_QUOTA_EXCEEDED. Not asked for validate_only requests."""
        results: dict[str, Result] = {}
        records: list[R.MetadataRecord] = []
        seen: set[str] = set()
        created_partitions = 0
        live_brokers = sum(1 for b in image.brokers.values() if not b.fenced)
        for t in topics:
            if t.name in seen:
                results[t.name] = Result(INVALID_REQUEST, "Duplicate topic name in request")
                continue
            seen.add(t.name)
            problem = validate_topic_name(t.name)
            if problem:
                results[t.name] = Result(INVALID_TOPIC_EXCEPTION, problem)
                continue
            if t.name in image.topics_by_name:
                results[t.name] = Result(TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
                continue
            if t.assignments:
                if t.num_partitions != -1 or t.replication_factor != -1:
                    results[t.name] = Result(
                        INVALID_REQUEST,
                        "Both numPartitions or replicationFactor and replicasAssignments "
                        "were set. Both cannot be used at the same time.",
                    )
                    continue
                parts = sorted(t.assignments)
                if parts != list(range(len(parts))):
                    results[t.name] = Result(
                        INVALID_REPLICA_ASSIGNMENT, "Partitions must be numbered 0..N-1"
                    )
                    continue
                assignment = [list(t.assignments[p]) for p in parts]
                unknown = [r for reps in assignment for r in reps if r not in image.brokers]
                malformed = [
                    reps for reps in assignment if not reps or len(set(reps)) != len(reps)
                ]
                if unknown or malformed:
                    results[t.name] = Result(
                        INVALID_REPLICA_ASSIGNMENT, f"Invalid replica assignment {assignment}"
                    )
                    continue
                num_partitions, rf = len(assignment), len(assignment[0])
            else:
                num_partitions = (
                    self.default_num_partitions if t.num_partitions == -1 else t.num_partitions
                )
                rf = (
                    self.default_replication_factor
                    if t.replication_factor == -1
                    else t.replication_factor
                )
                if num_partitions <= 0:
                    results[t.name] = Result(
                        INVALID_PARTITIONS, "Number of partitions must be larger than 0."
                    )
                    continue
                if rf <= 0:
                    results[t.name] = Result(
                        INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
                    )
                    continue
                if rf > live_brokers:
                    results[t.name] = Result(
                        INVALID_REPLICATION_FACTOR,
                        f"Unable to replicate the partition {rf} time(s): The target "
                        f"replication factor of {rf} cannot be reached because only "
                        f"{live_brokers} broker(s) are registered.",
                    )
                    continue
                assignment = None  # placed below, once the count is known to be bounded
            if created_partitions + num_partitions > MAX_PARTITIONS_PER_REQUEST:
                # Checked before placement: num_partitions 2**31-1 would place 2**31
                # partitions first (the fuzzer's CreateTopics that hung the broker).
                results[t.name] = Result(
                    POLICY_VIOLATION, "Excessively large number of partitions per request."
                )
                continue
            if len(records) + 1 + num_partitions + len(t.configs) > MAX_RECORDS_PER_USER_OP:
                # 10,000 partitions are 10,001 records with the TopicRecord (Kafka's
                # BoundedList refuses them with this POLICY_VIOLATION too)
                results[t.name] = Result(POLICY_VIOLATION, TOO_LARGE_BATCH)
                continue
            if assignment is None:
                assignment = self._assign(image, 0, num_partitions, rf)
            problem = self.validate_configs(t.configs)
            if problem:
                results[t.name] = Result(INVALID_CONFIG, problem)
                continue
            if admit is not None and not validate_only and not admit(num_partitions):
                results[t.name] = Result(THROTTLING_QUOTA_EXCEEDED, THROTTLED)
                continue
            created_partitions += num_partitions
            topic_id = uuid.uuid4()
            results[t.name] = Result(NONE, None, topic_id, num_partitions, rf)
            if validate_only:
                continue
            tid = str(topic_id)
            records.append(R.topic_record(t.name, tid))
            for p, replicas in enumerate(assignment):
                records.append(R.partition_record(tid, p, replicas, replicas[0]))
            for key, value in t.configs.items():
                if value is not None:
                    records.append(R.config_record(R.RESOURCE_TOPIC, t.name, key, value))
        return results, records

    def delete_topics(
        self, image: MetadataImage, names: Sequence[str], ids: Sequence[uuid.UUID],
        admit: Admit | None = None,
    ) -> tuple[dict[str, Result], dict[uuid.UUID, Result], list[R.MetadataRecord]]:
        """`admit(partitions)`: as for create_topics, per topic deleted."""
        by_name: dict[str, Result] = {}
        by_id: dict[uuid.UUID, Result] = {}
        records: list[R.MetadataRecord] = []
        removed: set[uuid.UUID] = set()

        def remove(topic_id: uuid.UUID, partitions: int) -> Result:
            if topic_id in removed:
                return Result(NONE, None, topic_id)
            if admit is not None and not admit(partitions):
                return Result(THROTTLING_QUOTA_EXCEEDED, THROTTLED, topic_id)
            removed.add(topic_id)
            records.append(R.remove_topic_record(str(topic_id)))
            return Result(NONE, None, topic_id)

        for name in names:
            topic = image.topics_by_name.get(name)
            if topic is None:
                by_name[name] = Result(
                    UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
                )
                continue
            by_name[name] = remove(topic.topic_id, len(topic.partitions))
        for tid in ids:
            topic = image.topics_by_id.get(tid)
            if topic is None:
                by_id[tid] = Result(UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
                continue
            by_id[tid] = remove(tid, len(topic.partitions))
        return by_name, by_id, records

    def create_partitions(
        self,
        image: MetadataImage,
        requests: Sequence[tuple[str, int, Sequence[Sequence[int]] | None]],
        validate_only: bool,
        admit: Admit | None = None,
    ) -> tuple[dict[str, Result], list[R.MetadataRecord]]:
        """`admit(partitions)`: as for create_topics, with the partitions added."""
        results: dict[str, Result] = {}
        records: list[R.MetadataRecord] = []
        for name, count, assignments in requests:
            topic = image.topics_by_name.get(name)
            if topic is None:
                results[name] = Result(
                    UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
                )
                continue
            current = len(topic.partitions)
            if count < current:
                results[name] = Result(
                    INVALID_PARTITIONS,
                    f"Topic currently has {current} partitions, which is higher than the "
                    f"requested {count}.",
                )
                continue
            if count == current:
                results[name] = Result(
                    INVALID_PARTITIONS, f"Topic already has {current} partitions."
                )
                continue
            if count - current > MAX_PARTITIONS_PER_REQUEST:
                results[name] = Result(
                    POLICY_VIOLATION, "Excessively large number of partitions per request."
                )
                continue
            if len(records) + count - current > MAX_RECORDS_PER_USER_OP:
                results[name] = Result(POLICY_VIOLATION, TOO_LARGE_BATCH)
                continue
            rf = len(topic.partitions[0].replicas) if topic.partitions else 1
            if assignments:
                if len(assignments) != count - current or any(
                    len(a) != rf or any(r not in image.brokers for r in a) for a in assignments
                ):
                    results[name] = Result(
                        INVALID_REPLICA_ASSIGNMENT, f"Invalid replica assignment {assignments}"
                    )
                    continue
                new = [list(a) for a in assignments]
            else:
                new = self._assign(image, current, count - current, rf)
            if admit is not None and not validate_only and not admit(count - current):
                results[name] = Result(THROTTLING_QUOTA_EXCEEDED, THROTTLED)
                continue
            results[name] = Result(NONE, None, topic.topic_id)
            if validate_only:
                continue
            for i, replicas in enumerate(new):
                records.append(
                    R.partition_record(str(topic.topic_id), current + i, replicas, replicas[0])
                )
        return results, records

    # -- configs ---------------------------------------------------------------

    OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

    def _config_target(
        self, image: MetadataImage, resource_type: int, resource_name: str
    ) -> Result | None:
        if resource_type == R.RESOURCE_TOPIC:
            if resource_name not in image.topics_by_name:
                return Result(
                    UNKNOWN_TOPIC_OR_PARTITION,
                    f"Topic {resource_name} does not exist",
                )
            return None
        if resource_type == R.RESOURCE_BROKER:
            if self.validate_broker_configs is None:
                return Result(INVALID_REQUEST, "Dynamic broker configs are not supported here")
            # a broker id, or "" for the cluster-wide default of every broker
            if resource_name and not resource_name.isdigit():
                return Result(INVALID_REQUEST, f"Invalid broker id {resource_name}")
            return None
        if resource_type == R.RESOURCE_GROUP and self.validate_group_configs is not None:
            if not resource_name:
                return Result(INVALID_REQUEST, "Group name must not be empty")
            return None
        return Result(INVALID_REQUEST, f"Unsupported resource type {resource_type}")

    def _validate(self, resource_type: int, configs: Mapping[str, str | None],
                  current: Mapping[str, str | None]) -> str | None:
        if resource_type == R.RESOURCE_BROKER:
            assert self.validate_broker_configs is not None  # _config_target checked
            return self.validate_broker_configs(configs)
        if resource_type == R.RESOURCE_GROUP:
            assert self.validate_group_configs is not None  # _config_target checked
            return self.validate_group_configs(configs)
        return self.validate_configs(configs) or check_topic_config_change(current, configs)

    def incremental_alter_configs(
        self,
        image: MetadataImage,
        resources: Sequence[tuple[int, str, Sequence[tuple[str, int, str | None]]]],
        validate_only: bool,
    ) -> tuple[list[Result], list[R.MetadataRecord]]:
        results: list[Result] = []
        records: list[R.MetadataRecord] = []
        for rtype, rname, ops in resources:
            problem = self._config_target(image, rtype, rname)
            if problem:
                results.append(problem)
                continue
            current = dict(image.configs.get((rtype, rname), {}))
            new: dict[str, str | None] = dict(current)
            error: Result | None = None
            for name, op, value in ops:
                if op == self.OP_SET:
                    new[name] = value
                elif op == self.OP_DELETE:
                    new.pop(name, None)
                elif op in (self.OP_APPEND, self.OP_SUBTRACT):
                    base = new.get(name)
                    if base is None and rtype == R.RESOURCE_TOPIC:
                        base = self.topic_config_default(name)
                    items = [x for x in (base or "").split(",") if x]
                    values = [x for x in (value or "").split(",") if x]
                    if op == self.OP_APPEND:
                        items += [v for v in values if v not in items]
                    else:
                        items = [x for x in items if x not in values]
                    new[name] = ",".join(items)
                else:
                    error = Result(INVALID_REQUEST, f"Unknown config operation {op}")
                    break
            if error is None:
                message = (self._validate(rtype, new, current)
                           or ELR.config_refusal(image, rtype, rname, current, new))
                if message:
                    error = Result(INVALID_CONFIG, message)
            if error:
                results.append(error)
                continue
            results.append(Result())
            if not validate_only:
                records.extend(_config_diff(rtype, rname, current, new))
        return results, records + ELR.cleared_by_config(image, records)

    def alter_configs(
        self,
        image: MetadataImage,
        resources: Sequence[tuple[int, str, Sequence[tuple[str, str | None]]]],
        validate_only: bool,
    ) -> tuple[list[Result], list[R.MetadataRecord]]:
        """Legacy AlterConfigs: the given set replaces the resource's whole config."""
        results: list[Result] = []
        records: list[R.MetadataRecord] = []
        for rtype, rname, entries in resources:
            problem = self._config_target(image, rtype, rname)
            if problem:
                results.append(problem)
                continue
            new = {name: value for name, value in entries if value is not None}
            message = (self._validate(rtype, new, image.configs.get((rtype, rname), {}))
                       or ELR.config_refusal(image, rtype, rname,
                                             image.configs.get((rtype, rname), {}), new))
            if message:
                results.append(Result(INVALID_CONFIG, message))
                continue
            results.append(Result())
            if not validate_only:
                current = dict(image.configs.get((rtype, rname), {}))
                records.extend(_config_diff(rtype, rname, current, new))
        return results, records + ELR.cleared_by_config(image, records)


def _rack_alternated(brokers: list[int], racks: Mapping[int, str | None]) -> list[int]:
    """Kafka's rack-alternated broker list: one broker of each rack in turn."""
    by_rack: dict[str | None, list[int]] = {}
    for b in brokers:
        by_rack.setdefault(racks[b], []).append(b)
    columns = [by_rack[r] for r in sorted(by_rack, key=lambda r: r or "")]
    out: list[int] = []
    for i in range(max(len(c) for c in columns)):
        out.extend(c[i] for c in columns if i < len(c))
    return out


def _config_diff(
    rtype: int, rname: str, old: Mapping[str, str], new: Mapping[str, str | None]
) -> list[R.MetadataRecord]:
    out = []
    for name, value in new.items():
        if value is not None and old.get(name) != value:
            out.append(R.config_record(rtype, rname, name, value))
    for name in old:
        if new.get(name) is None:
            out.append(R.config_record(rtype, rname, name, None))
    return out
