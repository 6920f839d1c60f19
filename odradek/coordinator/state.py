"""What the group coordinator holds, apart from what it does with it.

`GroupState` is the coordinator's memory: the `__consumer_offsets` partitions it
has loaded or is loading, its groups and their committed offsets, and where a
group lives (`partition_for`). `core.py`'s GroupCoordinator is a GroupState with
the protocol on top; the two helpers that fill or change the state from outside
the protocol, a partition's replay (`group_load.py`) and transactional offsets
becoming committed ones (`txn_offsets.py`), take a GroupState. So this module
sits below all three, and none of them imports another's class back. Committed
offsets are `offsets.py`'s `OffsetsState`, a GroupState that `GroupCoordinator`
extends.

Imports only the error codes, the group models (`classic.py`, `consumer.py`) and the
record values (`records.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import errors as E
from .classic import ClassicGroup, GroupLimits
from .consumer import ConsumerConfig, ConsumerGroup
from .records import OffsetValue

OFFSETS_TOPIC = "__consumer_offsets"
MAX_GROUPS = 100_000  # groups per broker; a new group beyond it is refused
MAX_GROUP_ID_LENGTH = 32767

Group = ClassicGroup | ConsumerGroup
TopicPartition = tuple[str, int]


def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    h = java_string_hashcode(group_id)
    return (0 if h == -(2**31) else abs(h)) % num_partitions  # Kafka's Utils.abs


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    num_partitions: int = 50
    limits: GroupLimits = field(default_factory=GroupLimits)
    consumer: ConsumerConfig = field(default_factory=ConsumerConfig)
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offset_metadata_max_bytes: int = 4096
    # group.consumer.migration.policy (migration.py): bidirectional, upgrade,
    # downgrade or disabled; Kafka 4's default
    migration_policy: str = "bidirectional"


class GroupState:
    """The loaded partitions, their groups and committed offsets."""

    def __init__(self, config: CoordinatorConfig) -> None:
        self.config = config
        self.loaded: set[int] = set()
        self.loading: set[int] = set()  # partitions being replayed (group_load.py)
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    def coordinator_error(self, key: str) -> int:
        """NONE when this broker coordinates `key`'s partition (loaded or loading),
        else NOT_COORDINATOR: FindCoordinator answers this broker during a load."""
        p = self.partition_for(key)
        return E.NONE if p in self.loaded or p in self.loading else E.NOT_COORDINATOR

    def check(self, group_id: str | None) -> int:
        if not group_id:
            return E.INVALID_GROUP_ID
        if len(group_id) > MAX_GROUP_ID_LENGTH:
            return E.INVALID_GROUP_ID
        p = self.partition_for(group_id)
        if p in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self.loaded:
            return E.NOT_COORDINATOR
        return E.NONE

    def materialize_offsets(
        self, group_id: str, offsets: dict[TopicPartition, OffsetValue]
    ) -> None:
        """A committed transaction's offsets become the group's (already in the log)."""
        self.offsets.setdefault(group_id, {}).update(offsets)
        if group_id not in self.groups and len(self.groups) < MAX_GROUPS:
            self.groups[group_id] = ClassicGroup(group_id, self.config.limits, 0)
