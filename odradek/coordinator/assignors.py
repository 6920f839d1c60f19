"""Server-side assignors of KIP-848 consumer groups: `uniform` and `range`.

Input: each member's subscribed topic names, the topics that exist (name ->
(topic id, partition count)) and the previous target assignment. Output: the
new target assignment, member id -> {topic id: partitions}. Pure functions.

- `uniform` spreads every subscribed partition so that, among the members that
  can take a partition, counts differ by at most one where the subscriptions
  allow it; it is sticky: a partition stays with its previous owner unless it
  must move for balance.
- `range` gives each member, topic by topic, a contiguous range of partitions
  (members sorted by id, the first `partitions % members` get one more), like
  Kafka's RangeAssignor; equal subscriptions co-partition.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

TopicPartition = tuple[uuid.UUID, int]
Assignment = dict[str, dict[uuid.UUID, set[int]]]
Assignor = Callable[
    [Mapping[str, frozenset[str]], Mapping[str, tuple[uuid.UUID, int]], Assignment], Assignment
]


def _result(
    members: Mapping[str, frozenset[str]], owned: dict[str, set[TopicPartition]]
) -> Assignment:
    out: Assignment = {m: {} for m in members}
    for member, tps in owned.items():
        for tid, p in tps:
            out[member].setdefault(tid, set()).add(p)
    return out


def uniform(
    members: Mapping[str, frozenset[str]],
    topics: Mapping[str, tuple[uuid.UUID, int]],
    previous: Assignment,
) -> Assignment:
    order = sorted(members)
    eligible: dict[TopicPartition, list[str]] = {}
    for name in sorted({t for subs in members.values() for t in subs}):
        if name not in topics:
            continue
        tid, count = topics[name]
        subscribers = [m for m in order if name in members[m]]
        for p in range(count):
            eligible[(tid, p)] = subscribers
    owned: dict[str, set[TopicPartition]] = {m: set() for m in order}
    owner: dict[TopicPartition, str] = {}
    for member in order:  # keep what is still allowed
        for tid, parts in previous.get(member, {}).items():
            for p in parts:
                tp = (tid, p)
                if tp in eligible and tp not in owner and member in eligible[tp]:
                    owner[tp] = member
                    owned[member].add(tp)
    for tp, subscribers in eligible.items():  # place the rest on the least loaded
        if tp not in owner:
            target = min(subscribers, key=lambda m: (len(owned[m]), m))
            owner[tp] = target
            owned[target].add(tp)
    # Move partitions from members above the least loaded eligible member by more than one.
    for _ in range(len(eligible) + 1):
        moved = False
        for tp in sorted(eligible, key=lambda t: (str(t[0]), t[1])):
            current = owner[tp]
            target = min(eligible[tp], key=lambda m: (len(owned[m]), m))
            if len(owned[current]) > len(owned[target]) + 1:
                owned[current].discard(tp)
                owned[target].add(tp)
                owner[tp] = target
                moved = True
        if not moved:
            break
    return _result(members, owned)


def range_(
    members: Mapping[str, frozenset[str]],
    topics: Mapping[str, tuple[uuid.UUID, int]],
    previous: Assignment,
) -> Assignment:
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    for name in sorted({t for subs in members.values() for t in subs}):
        if name not in topics:
            continue
        tid, count = topics[name]
        subscribers = sorted(m for m in members if name in members[m])
        base, extra = divmod(count, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            n = base + (1 if i < extra else 0)
            owned[m].update((tid, p) for p in range(start, start + n))
            start += n
    return _result(members, owned)


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
DEFAULT_ASSIGNOR = "uniform"
