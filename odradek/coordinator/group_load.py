"""Replaying one `__consumer_offsets` partition into the group coordinator.

A load is fed the partition's (key, value) records in log order, possibly
over many event-loop turns (service.py feeds it in slices), and keeps only
the latest value of each key: committed offsets, classic group metadata
(records.py) and the KIP-848 records (consumer_records.py). `install` then
builds the groups at once, so the coordinator never serves a half-loaded
partition: until then its groups answer COORDINATOR_LOAD_IN_PROGRESS.

A group with both a classic GroupMetadata value and a KIP-848 group epoch
(only possible if a conversion's tombstones were lost) is loaded as the
consumer group.
"""

from __future__ import annotations

import logging

from . import consumer_state
from .classic import ClassicGroup
from .consumer_records import decode_consumer_key
from .records import (
    CorruptRecord,
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from .state import OFFSETS_TOPIC, GroupState, TopicPartition

log = logging.getLogger(__name__)



class GroupLoad:
    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.count = 0  # records applied
        self.group_values: dict[str, GroupValue | None] = {}
        self.offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}
        # group -> (record kind, member id or None) -> latest value
        self.consumer: dict[str, dict[tuple[int, str | None], bytes]] = {}

    def feed(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        try:
            k = decode_key(key)
            if isinstance(k, OffsetKey):
                tp = (k.topic, k.partition)
                if value is None:
                    self.offsets.get(k.group, {}).pop(tp, None)
                else:
                    self.offsets.setdefault(k.group, {})[tp] = decode_offset_value(value)
            elif isinstance(k, GroupKey):
                self.group_values[k.group] = None if value is None else decode_group_value(value)
            else:
                ck = decode_consumer_key(key)
                if ck is None:
                    return  # share groups, streams groups: not ours
                values = self.consumer.setdefault(ck.group, {})
                if value is None:
                    values.pop((ck.kind, ck.member_id), None)
                else:
                    values[(ck.kind, ck.member_id)] = bytes(value)
        except (CorruptRecord, UnicodeDecodeError) as e:
            log.warning(
                "%s-%d: skipping a record that does not parse: %s", OFFSETS_TOPIC, self.partition, e
            )
            return
        self.count += 1

    def install(self, core: GroupState, now_ms: int) -> None:
        """Make the loaded groups and offsets the coordinator's; the partition is loaded."""
        config = core.config
        for group_id, values in self.consumer.items():
            if not values:
                continue
            try:
                group = consumer_state.rebuild(group_id, values, config.consumer, now_ms)
            except (CorruptRecord, UnicodeDecodeError) as e:
                log.warning(
                    "%s-%d: consumer group %r not loaded: %s",
                    OFFSETS_TOPIC,
                    self.partition,
                    group_id,
                    e,
                )
                continue
            if group is not None:
                core.groups[group_id] = group
        for group_id, gv in self.group_values.items():
            if gv is not None and group_id not in core.groups:
                core.groups[group_id] = ClassicGroup.from_value(group_id, gv, config.limits, now_ms)
        for group_id, entries in self.offsets.items():
            if not entries:
                continue
            core.offsets[group_id] = entries
            if group_id not in core.groups:
                core.groups[group_id] = ClassicGroup(group_id, config.limits, now_ms)
        core.loading.discard(self.partition)
        core.loaded.add(self.partition)
